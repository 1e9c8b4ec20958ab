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

This module is the adapter's public face; the state file is ``statefile``, how jobs start
and end on their own is ``lifecycle``, the processes are ``procs``.

Use::

    sched = LocalScheduler(Path("/tmp/cluster"), nodes=("node1", "node2", "node3", "node4"))
    job_id = sched.submit(LocalJobSpec(name="demo", nnodes=2, nproc_per_node=2,
        command=("-m", "trainmedic.demo.trainer.cli", "--run-dir", run_dir), run_dir=run_dir))
    snapshot = sched.poll([job_id])
    sched.requeue(job_id, exclude_nodes=["node2"])
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import (
    DRAIN_REASON_PREFIX,
    ClusterSnapshot,
    JobInfo,
    SchedulerAdapter,
)
from trainmedic.schedulers.local.lifecycle import JobLifecycle
from trainmedic.schedulers.local.procs import LaunchTable
from trainmedic.schedulers.local.state import (
    JobRecord,
    LocalJobSpec,
    NodeRecord,
    job_info,
    node_infos,
)
from trainmedic.schedulers.local.statefile import ClusterStateFile, require_job, require_node

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
        self._procs = LaunchTable(self.cluster_dir, python, grace_s)
        self._store = ClusterStateFile(self.cluster_dir)
        self._jobs = JobLifecycle(self.cluster_dir, self._procs, self._store)
        try:
            self.cluster_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SchedulerError(f"local scheduler: cannot use {self.cluster_dir}: {exc}") from exc
        with self._store.transaction() as state:
            known = {n.name for n in state.nodes}
            if nodes is None:
                nodes = () if known else DEFAULT_NODES
            bad = [n for n in nodes if not _NODE_NAME.fullmatch(n)]
            if bad:
                raise SchedulerError(f"local scheduler: invalid node names {bad}")
            for node in nodes:
                (self.cluster_dir / "nodes" / node).mkdir(parents=True, exist_ok=True)
            added = tuple(NodeRecord(n) for n in nodes if n not in known)
            self._store.save(dataclasses.replace(state, nodes=state.nodes + added))

    # -- paths ----------------------------------------------------------------------------

    def node_dir(self, node: str) -> Path:
        return self.cluster_dir / "nodes" / node

    def kernel_log(self, node: str) -> Path:
        """Where this node's kernel log lives (the trainer's hardware faults append here)."""
        return self._procs.kernel_log(node)

    def node_names(self) -> tuple[str, ...]:
        with self._store.transaction() as state:
            return tuple(n.name for n in state.nodes)

    # -- submit and poll ---------------------------------------------------------------------

    def submit(self, spec: LocalJobSpec) -> str:
        """Queue the job and start it at once if enough nodes are free; returns its id."""
        if spec.nnodes < 1 or spec.nproc_per_node < 1 or not spec.command:
            raise SchedulerError(f"local scheduler: invalid job spec {spec!r}")
        with self._store.transaction() as state:
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
            state = self._store.put(state, job)
            self._jobs.try_start(state, job)
        return job_id

    def poll(self, job_ids: Sequence[str]) -> ClusterSnapshot:
        """Reconcile every job with its processes, start pending ones, and report."""
        now = time.time()
        try:
            with self._store.transaction() as state:
                for job_id in list(state.jobs):
                    state = self._jobs.reconcile(state, state.jobs[job_id])
                jobs = tuple(job_info(state.jobs[j]) for j in job_ids if j in state.jobs)
                return ClusterSnapshot(time=now, jobs=jobs, nodes=node_infos(state))
        # poll never raises: a failed look is "unknown", not a verdict.
        except (SchedulerError, OSError) as exc:
            return ClusterSnapshot(time=now, stale=True, error=str(exc))

    def job(self, job_id: str) -> JobInfo:
        """The job's current view (reconciled first)."""
        with self._store.transaction() as state:
            state = self._jobs.reconcile(state, require_job(state, job_id))
            return job_info(state.jobs[job_id])

    # -- actions -------------------------------------------------------------------------

    def _restart(self, job_id: str, exclude: Sequence[str], held: bool) -> None:
        with self._store.transaction() as state:
            job = require_job(state, job_id)
            excluded = tuple(dict.fromkeys([*job.excluded, *exclude]))
            unknown = sorted(set(exclude) - {n.name for n in state.nodes})
            if unknown:
                raise SchedulerError(f"local scheduler: unknown nodes {unknown}")
            pending = dataclasses.replace(
                job,
                state=JobState.PENDING,
                excluded=excluded,
                held=held,
                reason="JobHeldAdmin" if held else "",
            )
            state, job = self._jobs.replace_stopping(state, job, pending)
            self._jobs.try_start(state, job)

    def requeue(self, job_id: str, exclude_nodes: Sequence[str]) -> None:
        """Stop the job if running and start it again (attempt + 1) on nodes outside
        ``exclude_nodes`` and its earlier exclusions. If too few undrained nodes would be
        left, the oldest exclusions are dropped and the job's ``reason`` says so. A held
        job gets the exclusions and is released (what the Slurm adapter does with a job a
        cut-short requeue left held)."""
        self._restart(job_id, exclude_nodes, held=False)

    def hold(self, job_id: str) -> None:
        """Stop the job if running and keep it pending, not started, until ``release``."""
        with self._store.transaction() as state:
            job = require_job(state, job_id)
            if job.held or (job.state.is_terminal() and job.state is not JobState.FAILED):
                return
        self._restart(job_id, (), held=True)

    def release(self, job_id: str) -> None:
        with self._store.transaction() as state:
            job = require_job(state, job_id)
            if not job.held:
                return
            job = dataclasses.replace(job, held=False, reason="")
            self._jobs.try_start(self._store.put(state, job), job)

    def cancel(self, job_id: str, reason: str) -> None:
        """Stop the job for good (CANCELLED); a finished job is left as it is."""
        with self._store.transaction() as state:
            job = require_job(state, job_id)
            if job.state.is_terminal():
                return
            cancelled = dataclasses.replace(
                job, state=JobState.CANCELLED, held=False, reason=reason, ended_at=time.time()
            )
            self._jobs.replace_stopping(state, job, cancelled)

    def drain(self, node: str, reason: str) -> bool:
        """Drain ``node`` (running jobs go on; nothing new starts there). ``reason`` must
        start with ``trainmedic:``; returns False, changing nothing, when the node is
        already drained by another owner."""
        if not reason.startswith(DRAIN_REASON_PREFIX):
            raise SchedulerError(
                f"drain reason must start with {DRAIN_REASON_PREFIX!r}: {reason!r}"
            )
        with self._store.transaction() as state:
            record = require_node(state, node)
            if record.drain and not record.reason.startswith(DRAIN_REASON_PREFIX):
                return False
            self._store.set_node(state, dataclasses.replace(record, drain=True, reason=reason))
            return True

    def admin_drain(self, node: str, reason: str) -> None:
        """Drain as an operator or another tool would (any reason, e.g. ``NHC: ...``)."""
        with self._store.transaction() as state:
            record = require_node(state, node)
            self._store.set_node(state, dataclasses.replace(record, drain=True, reason=reason))

    def resume_node(self, node: str, force: bool = False) -> None:
        """Undrain a node drained by trainmedic; another owner's drain stays unless ``force``."""
        with self._store.transaction() as state:
            record = require_node(state, node)
            if not record.drain:
                return
            if not force and not record.reason.startswith(DRAIN_REASON_PREFIX):
                log.warning("local scheduler: not resuming %s: drained by another owner", node)
                return
            self._store.set_node(state, NodeRecord(node))

    def shutdown(self, cancel_jobs: bool = True) -> None:
        """Cancel every unfinished job (the demo's and tests' clean-up)."""
        with self._store.transaction() as state:
            job_ids = [j.job_id for j in state.jobs.values() if not j.state.is_terminal()]
        if cancel_jobs:
            for job_id in job_ids:
                self.cancel(job_id, "shutdown")


def _conforms(scheduler: LocalScheduler) -> SchedulerAdapter:
    """Never called: mypy checks here that LocalScheduler satisfies the Protocol."""
    return scheduler
