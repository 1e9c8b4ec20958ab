"""The embedded local scheduler: jobs run as torchrun process groups on named virtual nodes.

A "node" is a name plus a directory, ``<cluster>/nodes/<node>/`` (its kernel log is
``kern.log`` there). ``submit`` starts one ``torchrun --nnodes=N --node_rank=i`` per chosen
node, all on 127.0.0.1 with a free master port, each in a session of its own, with the
environment TRAINMEDIC_NODE, TRAINMEDIC_KERNEL_LOG, TRAINMEDIC_ATTEMPT, TRAINMEDIC_JOB_ID.
All attempts append to ``<run_dir>/job.out`` (like Slurm's ``--open-mode=append``), each
start announced by a banner line.

Survives its own death: the process table is a JSON state file in the cluster directory
(``state.json``, rewritten atomically under an flock), and each torchrun runs under a tiny
``sh`` wrapper that writes its exit status to a file when it ends. A new ``LocalScheduler``
on the same directory re-adopts whatever is running.

Semantics, as Slurm's: when one node's torchrun fails the job's other nodes are stopped (as
srun does) and the job is FAILED; ``requeue`` restarts it (attempt + 1) excluding nodes;
``hold``/``release``; ``cancel``; ``drain`` with a ``trainmedic:`` reason, never over another
owner's reason. Mutating calls raise ``SchedulerError``; ``poll`` never raises.

Use::

    sched = LocalScheduler(Path("/tmp/cluster"), nodes=("node1", "node2", "node3", "node4"))
    job_id = sched.submit(LocalJobSpec(name="demo", nnodes=2, nproc_per_node=2,
        command=("-m", "trainmedic.demo.trainer.cli", "--run-dir", run_dir), run_dir=run_dir))
    snapshot = sched.poll([job_id])
    sched.requeue(job_id, exclude_nodes=["node2"])
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import (
    DRAIN_REASON_PREFIX,
    ClusterSnapshot,
    JobInfo,
    SchedulerAdapter,
)
from trainmedic.schedulers.local import launch as proc
from trainmedic.schedulers.local.procs import LaunchTable
from trainmedic.schedulers.local.state import (
    ClusterState,
    JobRecord,
    Launch,
    LocalJobSpec,
    NodeRecord,
    choose_nodes,
    job_info,
    launch_outcome,
    node_infos,
    relax_exclusions,
    state_from_json,
    state_to_json,
    write_atomic,
)

__all__ = ["DEFAULT_NODES", "LocalJobSpec", "LocalScheduler"]

log = logging.getLogger(__name__)

DEFAULT_NODES = ("node1", "node2", "node3", "node4")
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class LocalScheduler:
    """SchedulerAdapter over local torchrun process groups (see the module docstring).

    ``nodes``: the virtual node names; None keeps those already in ``cluster_dir`` (or
    node1..node4 for a new one); new names are added, none removed. ``python`` runs
    torchrun; ``grace_s`` is how long a stop waits after SIGTERM before SIGKILL.
    """

    name = "local"

    def __init__(
        self,
        cluster_dir: Path,
        nodes: Sequence[str] | None = None,
        python: str = sys.executable,
        grace_s: float = 5.0,
    ) -> None:
        self.cluster_dir = Path(cluster_dir)
        self._lock = threading.RLock()
        self._procs = LaunchTable(self.cluster_dir, python, grace_s)
        self._state_path = self.cluster_dir / "state.json"
        self._lock_path = self.cluster_dir / "state.lock"
        try:
            self.cluster_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SchedulerError(f"local scheduler: cannot use {self.cluster_dir}: {exc}") from exc
        with self._transaction() as state:
            known = {n.name for n in state.nodes}
            if nodes is None:
                nodes = () if known else DEFAULT_NODES
            bad = [n for n in nodes if not _NODE_NAME.fullmatch(n)]
            if bad:
                raise SchedulerError(f"local scheduler: invalid node names {bad}")
            for node in nodes:
                (self.cluster_dir / "nodes" / node).mkdir(parents=True, exist_ok=True)
            added = tuple(NodeRecord(n) for n in nodes if n not in known)
            self._save(dataclasses.replace(state, nodes=state.nodes + added))

    # -- paths ----------------------------------------------------------------------------

    def node_dir(self, node: str) -> Path:
        return self.cluster_dir / "nodes" / node

    def kernel_log(self, node: str) -> Path:
        """Where this node's kernel log lives (the trainer's hardware faults append here)."""
        return self._procs.kernel_log(node)

    def node_names(self) -> tuple[str, ...]:
        with self._transaction() as state:
            return tuple(n.name for n in state.nodes)

    # -- the state file ----------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[ClusterState]:
        """Hold the thread lock and the file lock; yield the current state. OS errors in
        the body (state file, job output, spawning) leave as SchedulerError."""
        try:
            with self._lock, open(self._lock_path, "a") as lock_file:
                fcntl.flock(lock_file, fcntl.LOCK_EX)
                try:
                    yield self._load()
                finally:
                    fcntl.flock(lock_file, fcntl.LOCK_UN)
        except OSError as exc:
            raise SchedulerError(f"local scheduler: {exc}") from exc

    def _load(self) -> ClusterState:
        try:
            text = self._state_path.read_text()
        except FileNotFoundError:
            return ClusterState(nodes=())
        try:
            return state_from_json(text)
        except (ValueError, KeyError, TypeError) as exc:
            raise SchedulerError(
                f"local scheduler: corrupt state {self._state_path}: {exc}"
            ) from exc

    def _save(self, state: ClusterState) -> None:
        write_atomic(self._state_path, state_to_json(state))

    def _put(self, state: ClusterState, job: JobRecord) -> ClusterState:
        if state.jobs.get(job.job_id) == job:
            return state  # unchanged: no write (poll runs often)
        state = dataclasses.replace(state, jobs={**state.jobs, job.job_id: job})
        self._save(state)
        return state

    @staticmethod
    def _job(state: ClusterState, job_id: str) -> JobRecord:
        job = state.jobs.get(job_id)
        if job is None:
            raise SchedulerError(f"local scheduler: unknown job {job_id!r}")
        return job

    # -- submit and poll ---------------------------------------------------------------------

    def submit(self, spec: LocalJobSpec) -> str:
        """Queue the job and start it at once if enough nodes are free; returns its id."""
        if spec.nnodes < 1 or spec.nproc_per_node < 1 or not spec.command:
            raise SchedulerError(f"local scheduler: invalid job spec {spec!r}")
        with self._transaction() as state:
            if spec.nnodes > len(state.nodes):
                raise SchedulerError(
                    f"local scheduler: job needs {spec.nnodes} nodes, cluster has "
                    f"{len(state.nodes)}"
                )
            job_id = str(state.next_job)
            # Pin relative paths to the submitter's directory: a re-adopting instance may
            # run elsewhere, and relative arguments in the command must keep their meaning.
            spec = dataclasses.replace(
                spec, run_dir=str(Path(spec.run_dir).absolute()), cwd=spec.cwd or os.getcwd()
            )
            job = JobRecord(job_id=job_id, spec=spec, submitted_at=time.time())
            state = dataclasses.replace(state, next_job=state.next_job + 1)
            state = self._put(state, job)
            self._try_start(state, job)
        return job_id

    def poll(self, job_ids: Sequence[str]) -> ClusterSnapshot:
        """Reconcile every job with its processes, start pending ones, and report."""
        now = time.time()
        try:
            with self._transaction() as state:
                for job_id in list(state.jobs):
                    state = self._reconcile(state, state.jobs[job_id])
                jobs = tuple(job_info(state.jobs[j]) for j in job_ids if j in state.jobs)
                return ClusterSnapshot(time=now, jobs=jobs, nodes=node_infos(state))
        # poll never raises: a failed look is "unknown", not a verdict.
        except (SchedulerError, OSError) as exc:
            return ClusterSnapshot(time=now, stale=True, error=str(exc))

    def job(self, job_id: str) -> JobInfo:
        """The job's current view (reconciled first)."""
        with self._transaction() as state:
            state = self._reconcile(state, self._job(state, job_id))
            return job_info(state.jobs[job_id])

    def _reconcile(self, state: ClusterState, job: JobRecord) -> ClusterState:
        if job.stale:
            self._procs.stop([*job.stale])
            job = dataclasses.replace(job, stale=())
            state = self._put(state, job)
        if job.state is JobState.RUNNING:
            if any(launch.pid == 0 for launch in job.launches):
                # The service died while starting this job: finish the stop and start the
                # same attempt again (a start that never completed is not a new attempt,
                # which a restarted recovery service would read as a second requeue).
                self._procs.stop([*job.launches])
                job = dataclasses.replace(
                    job,
                    state=JobState.PENDING,
                    launches=(),
                    starts=job.starts - 1,
                    attempt=max(job.attempt - 1, 0),
                )
                return self._try_start(self._put(state, job), job)
            return self._check_running(state, job)
        if job.state is JobState.PENDING and not job.held:
            return self._try_start(state, job)
        return state

    def _check_running(self, state: ClusterState, job: JobRecord) -> ClusterState:
        codes = [self._procs.exit_code(launch) for launch in job.launches]
        alive = [
            code is None and self._procs.alive(launch)
            for launch, code in zip(job.launches, codes, strict=True)
        ]
        if not job.launches:
            return state
        # Re-read exit files of launches that just died: the wrapper writes the file after
        # the child ends, so a dead wrapper without a file is only certain on a second look.
        codes = [
            self._procs.exit_code(launch) if code is None and not up else code
            for launch, code, up in zip(job.launches, codes, alive, strict=True)
        ]
        outcome = launch_outcome(codes, alive)
        if outcome is JobState.RUNNING:
            return state
        reason, exit_code = "", 0
        if outcome is JobState.FAILED:
            # Like srun: one node's failure ends the job's other nodes too.
            self._procs.stop([launch for launch, up in zip(job.launches, alive, strict=True) if up])
            failed = [
                (self._procs.exit_time(launch), launch.node, code)
                for launch, code, up in zip(job.launches, codes, alive, strict=True)
                if code not in (None, 0) or (code is None and not up)
            ]
            # Listed in the order the torchruns ended. That is not necessarily the order the
            # ranks failed in (a peer's torchrun may exit first): attribution is the
            # service's job, from the logs.
            failed.sort(key=lambda item: item[0])
            first_code = failed[0][2]
            exit_code = -9 if first_code is None else first_code
            ended = ", ".join(
                f"{node} exit {'killed' if code is None else code}" for _t, node, code in failed
            )
            stopped = [launch.node for launch, up in zip(job.launches, alive, strict=True) if up]
            reason = f"NonZeroExitCode: {ended}"
            if stopped:
                reason += f"; stopped: {','.join(stopped)}"
        job = dataclasses.replace(
            job, state=outcome, exit_code=exit_code, reason=reason, ended_at=time.time()
        )
        return self._put(state, job)

    # -- starting and stopping ---------------------------------------------------------------

    def _try_start(self, state: ClusterState, job: JobRecord) -> ClusterState:
        """Start a pending job now if its nodes are free; otherwise leave it pending."""
        if job.state is not JobState.PENDING or job.held:
            return state
        all_nodes = [n.name for n in state.nodes]
        drained = {n.name for n in state.nodes if n.drain}
        excluded, dropped = relax_exclusions(all_nodes, drained, job.excluded, job.spec.nnodes)
        note = ""
        if dropped:
            note = f"exclusions dropped to stay schedulable: {','.join(dropped)}"
            log.warning("local scheduler: job %s: %s", job.job_id, note)
        unavailable = drained | state.busy_nodes(except_job=job.job_id)
        chosen = choose_nodes(all_nodes, unavailable, excluded, job.nodes, job.spec.nnodes)
        if chosen is None:
            reason = (
                "Resources"
                if len(set(all_nodes) - drained - set(excluded)) >= job.spec.nnodes
                else "ReqNodeNotAvail"
            )
            job = dataclasses.replace(job, excluded=excluded, reason=f"{reason} {note}".strip())
            return self._put(state, job)
        attempt = job.attempt + 1 if job.starts else 0
        port = proc.free_port()
        exits = self.cluster_dir / "jobs" / job.job_id
        exits.mkdir(parents=True, exist_ok=True)
        launches = tuple(
            Launch(
                node=node,
                node_rank=rank,
                marker=f"{job.job_id}.{attempt}.{node}.{os.getpid()}.{time.monotonic_ns()}",
                # One file per start: an interrupted start's wrapper may still write its own.
                exit_file=str(exits / f"attempt{attempt}-start{job.starts + 1}-{node}.exit"),
            )
            for rank, node in enumerate(chosen)
        )
        job = dataclasses.replace(
            job,
            state=JobState.RUNNING,
            nodes=chosen,
            attempt=attempt,
            starts=job.starts + 1,
            excluded=excluded,
            exit_code=None,
            reason=note,
            launches=launches,
            started_at=time.time(),
            ended_at=None,
        )
        # Record the launches (pid 0) before spawning: a crash in between leaves markers to
        # find and stop, never untracked processes.
        state = self._put(state, job)
        self._procs.banner(job)
        started = tuple(self._procs.spawn(job, launch, port) for launch in launches)
        return self._put(state, dataclasses.replace(job, launches=started))

    # -- actions -------------------------------------------------------------------------

    def _restart(self, job_id: str, exclude: Sequence[str], held: bool) -> None:
        with self._transaction() as state:
            job = self._job(state, job_id)
            excluded = tuple(dict.fromkeys([*job.excluded, *exclude]))
            unknown = sorted(set(exclude) - {n.name for n in state.nodes})
            if unknown:
                raise SchedulerError(f"local scheduler: unknown nodes {unknown}")
            stopping = job.launches if job.state is JobState.RUNNING else ()
            job = dataclasses.replace(
                job,
                state=JobState.PENDING,
                excluded=excluded,
                held=held,
                launches=(),
                stale=job.stale + stopping,
                reason="JobHeldAdmin" if held else "",
            )
            # Persist "pending, stopping these" first: if we die mid-stop, the next
            # instance finishes the stop and starts the job.
            state = self._put(state, job)
            self._procs.stop([*job.stale])
            job = dataclasses.replace(job, stale=())
            state = self._put(state, job)
            self._try_start(state, job)

    def requeue(self, job_id: str, exclude_nodes: Sequence[str]) -> None:
        """Stop the job if running and start it again (attempt + 1) on nodes outside
        ``exclude_nodes`` and its earlier exclusions. If too few undrained nodes would be
        left, the oldest exclusions are dropped and the job's ``reason`` says so. A held
        job gets the exclusions and is released (what the Slurm adapter does with a job a
        cut-short requeue left held)."""
        self._restart(job_id, exclude_nodes, held=False)

    def hold(self, job_id: str) -> None:
        """Stop the job if running and keep it pending, not started, until ``release``."""
        with self._transaction() as state:
            job = self._job(state, job_id)
            if job.held or (job.state.is_terminal() and job.state is not JobState.FAILED):
                return
        self._restart(job_id, (), held=True)

    def release(self, job_id: str) -> None:
        with self._transaction() as state:
            job = self._job(state, job_id)
            if not job.held:
                return
            job = dataclasses.replace(job, held=False, reason="")
            self._try_start(self._put(state, job), job)

    def cancel(self, job_id: str, reason: str) -> None:
        """Stop the job for good (CANCELLED); a finished job is left as it is."""
        with self._transaction() as state:
            job = self._job(state, job_id)
            if job.state.is_terminal():
                return
            stopping = job.launches if job.state is JobState.RUNNING else ()
            job = dataclasses.replace(
                job,
                state=JobState.CANCELLED,
                held=False,
                reason=reason,
                launches=(),
                stale=job.stale + stopping,
                ended_at=time.time(),
            )
            state = self._put(state, job)
            self._procs.stop([*job.stale])
            self._put(state, dataclasses.replace(job, stale=()))

    def drain(self, node: str, reason: str) -> bool:
        """Drain ``node`` (running jobs go on; nothing new starts there). ``reason`` must
        start with ``trainmedic:``; returns False, changing nothing, when the node is
        already drained by another owner."""
        if not reason.startswith(DRAIN_REASON_PREFIX):
            raise SchedulerError(
                f"drain reason must start with {DRAIN_REASON_PREFIX!r}: {reason!r}"
            )
        with self._transaction() as state:
            record = self._node(state, node)
            if record.drain and not record.reason.startswith(DRAIN_REASON_PREFIX):
                return False
            self._set_node(state, dataclasses.replace(record, drain=True, reason=reason))
            return True

    def admin_drain(self, node: str, reason: str) -> None:
        """Drain as an operator or another tool would (any reason, e.g. ``NHC: ...``)."""
        with self._transaction() as state:
            record = self._node(state, node)
            self._set_node(state, dataclasses.replace(record, drain=True, reason=reason))

    def resume_node(self, node: str, force: bool = False) -> None:
        """Undrain a node drained by trainmedic; another owner's drain stays unless ``force``."""
        with self._transaction() as state:
            record = self._node(state, node)
            if not record.drain:
                return
            if not force and not record.reason.startswith(DRAIN_REASON_PREFIX):
                log.warning("local scheduler: not resuming %s: drained by another owner", node)
                return
            self._set_node(state, NodeRecord(node))

    @staticmethod
    def _node(state: ClusterState, node: str) -> NodeRecord:
        record = state.node(node)
        if record is None:
            raise SchedulerError(f"local scheduler: unknown node {node!r}")
        return record

    def _set_node(self, state: ClusterState, record: NodeRecord) -> None:
        nodes = tuple(record if n.name == record.name else n for n in state.nodes)
        self._save(dataclasses.replace(state, nodes=nodes))

    def shutdown(self, cancel_jobs: bool = True) -> None:
        """Cancel every unfinished job (the demo's and tests' clean-up)."""
        with self._transaction() as state:
            job_ids = [j.job_id for j in state.jobs.values() if not j.state.is_terminal()]
        if cancel_jobs:
            for job_id in job_ids:
                self.cancel(job_id, "shutdown")


def _conforms(scheduler: LocalScheduler) -> SchedulerAdapter:
    """Never called: mypy checks here that LocalScheduler satisfies the Protocol."""
    return scheduler
