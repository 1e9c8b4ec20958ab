"""How a local job moves between states on its own: a pending job starts when its nodes are
free, a running one ends when its torchruns do (one node's failure stops the others, as
srun does), and a start a killed service left half done is finished.

Every step takes the state inside the caller's transaction and returns it as saved.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from pathlib import Path

from trainmedic.core.states import JobState
from trainmedic.schedulers.local import launch as proc
from trainmedic.schedulers.local.procs import LaunchTable
from trainmedic.schedulers.local.state import (
    ClusterState,
    JobRecord,
    Launch,
    choose_nodes,
    launch_outcome,
    relax_exclusions,
)
from trainmedic.schedulers.local.statefile import ClusterStateFile

log = logging.getLogger(__name__)


class JobLifecycle:
    """Starts pending jobs and reconciles running ones with their processes."""

    def __init__(self, cluster_dir: Path, procs: LaunchTable, store: ClusterStateFile) -> None:
        self.cluster_dir = cluster_dir
        self.procs = procs
        self.store = store

    def reconcile(self, state: ClusterState, job: JobRecord) -> ClusterState:
        if job.stale:
            self.procs.stop([*job.stale])
            job = dataclasses.replace(job, stale=())
            state = self.store.put(state, job)
        if job.state is JobState.RUNNING:
            if any(launch.pid == 0 for launch in job.launches):
                # The service died while starting this job: finish the stop and start the
                # same attempt again (a start that never completed is not a new attempt,
                # which a restarted recovery service would read as a second requeue).
                self.procs.stop([*job.launches])
                job = dataclasses.replace(
                    job,
                    state=JobState.PENDING,
                    launches=(),
                    starts=job.starts - 1,
                    attempt=max(job.attempt - 1, 0),
                )
                return self.try_start(self.store.put(state, job), job)
            return self._check_running(state, job)
        if job.state is JobState.PENDING and not job.held:
            return self.try_start(state, job)
        return state

    def replace_stopping(
        self, state: ClusterState, job: JobRecord, new: JobRecord
    ) -> tuple[ClusterState, JobRecord]:
        """``new`` (an update of ``job``) saved with ``job``'s running launches stopped. Saved
        first with those launches as ``stale``: if this instance dies mid-stop, the next one
        finishes the stop (``reconcile``) and, for a pending job, starts it."""
        stopping = job.launches if job.state is JobState.RUNNING else ()
        new = dataclasses.replace(new, launches=(), stale=job.stale + stopping)
        state = self.store.put(state, new)
        self.procs.stop([*new.stale])
        new = dataclasses.replace(new, stale=())
        return self.store.put(state, new), new

    def _check_running(self, state: ClusterState, job: JobRecord) -> ClusterState:
        codes = [self.procs.exit_code(launch) for launch in job.launches]
        alive = [
            code is None and self.procs.alive(launch)
            for launch, code in zip(job.launches, codes, strict=True)
        ]
        if not job.launches:
            return state
        # Re-read exit files of launches that just died: the wrapper writes the file after
        # the child ends, so a dead wrapper without a file is only certain on a second look.
        codes = [
            self.procs.exit_code(launch) if code is None and not up else code
            for launch, code, up in zip(job.launches, codes, alive, strict=True)
        ]
        outcome = launch_outcome(codes, alive)
        if outcome is JobState.RUNNING:
            return state
        reason, exit_code = "", 0
        if outcome is JobState.FAILED:
            # Like srun: one node's failure ends the job's other nodes too.
            self.procs.stop([launch for launch, up in zip(job.launches, alive, strict=True) if up])
            failed = [
                (self.procs.exit_time(launch), launch.node, code)
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
        return self.store.put(state, job)

    def try_start(self, state: ClusterState, job: JobRecord) -> ClusterState:
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
            return self.store.put(state, job)
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
        state = self.store.put(state, job)
        self.procs.banner(job)
        started = tuple(self.procs.spawn(job, launch, port) for launch in launches)
        return self.store.put(state, dataclasses.replace(job, launches=started))
