"""What the scheduler's answer means to the watched jobs: one ``JobStatus`` per job and one
``NodeStatus`` per node, the stored state and attempts brought up to date, and a failed poll
turned into "unknown" (told once per job per outage), never into "gone"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from trainmedic.core.observations import (
    JobStatus,
    NodeStatus,
    Observation,
    SourceRecovered,
    SourceStale,
)
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import ClusterSnapshot
from trainmedic.service.node_sources import NodeSources
from trainmedic.service.progress_format import ProgressFormatCheck
from trainmedic.service.source_status import SourceBoard
from trainmedic.store import JobRecord, JobStateChange, Store

if TYPE_CHECKING:
    from trainmedic.service.watched_jobs import JobSources


class SchedulerObservations:
    """The part of ``Service`` that reads the scheduler's snapshot (a mixin: the state it
    uses is the service's own, set up in ``Service.__init__``)."""

    store: Store
    sources: SourceBoard
    _jobs: dict[str, JobSources]
    _nodes: NodeSources
    _scheduler_unknown: set[str]
    _ended_due: dict[str, tuple[str, int]]
    progress_format: ProgressFormatCheck

    def _scheduler_observations(
        self, snapshot: ClusterSnapshot, stored_jobs: Mapping[str, JobRecord]
    ) -> list[Observation]:
        out: list[Observation] = []
        if snapshot.stale:
            # Silence is "unknown", never "gone": each job is told once per outage, and its
            # hang detection waits for the scheduler to answer again.
            detail = snapshot.error or "scheduler poll failed"
            for job_id in self._jobs:
                if job_id not in self._scheduler_unknown:
                    self._scheduler_unknown.add(job_id)
                    out.append(SourceStale(snapshot.time, "scheduler", detail, job_id=job_id))
            return out
        for job_id in sorted(self._scheduler_unknown):
            out.append(SourceRecovered(snapshot.time, "scheduler", job_id=job_id))
        self._scheduler_unknown.clear()
        changes: list[JobStateChange] = []
        for job in snapshot.jobs:
            if job.job_id not in self._jobs:
                continue
            self._nodes.jobs_run_on(job.nodes, snapshot.time)
            if job.state is JobState.RUNNING and job.nodes:
                self.sources.set_nodes(job.job_id, job.nodes)
            if job.state is JobState.RUNNING:
                self.progress_format.running(job.job_id, snapshot.time)
            out.append(
                JobStatus(
                    snapshot.time,
                    job.job_id,
                    job.state,
                    job.nodes,
                    job.attempt,
                    job.exit_code,
                    job.reason,
                )
            )
            stored = stored_jobs.get(job.job_id)
            # A requeued job still lists its old nodes while completing: an attempt's nodes
            # are recorded once it runs.
            held = self._ended_due.get(job.job_id) == (job.state.value, job.attempt)
            changed = stored is None or stored.state != job.state.value
            if not held and (changed or stored is None or stored.attempt != job.attempt):
                if job.state.is_terminal():
                    # Stored once the findings it leads to are (durable_state): a job stored
                    # as ended is let go by the next leader, its finding with it.
                    self._ended_due[job.job_id] = (job.state.value, job.attempt)
                else:
                    self._ended_due.pop(job.job_id, None)
                changes.append(
                    JobStateChange(
                        job.job_id,
                        None if job.state.is_terminal() else job.state.value,
                        job.attempt,
                        snapshot.time,
                        nodes=job.nodes,
                        ended=_ended_attempt(stored, job.state, job.attempt),
                        started=bool(job.nodes) and job.state is JobState.RUNNING,
                    )
                )
        # One transaction for the poll's changes, each job's in the order it happened.
        self.store.record_job_states(changes)
        for node in snapshot.nodes:
            out.append(NodeStatus(snapshot.time, node.name, node.state, node.reason))
        return out


def _ended_attempt(
    stored: JobRecord | None, state: JobState, attempt: int
) -> tuple[int, str] | None:
    """The stored attempt stopped running (another state or a newer attempt): its number and
    end state, recorded for the downtime accounting (the first end recorded wins; one never
    seen running with its nodes has nothing to close)."""
    if stored is None or stored.state != JobState.RUNNING.value:
        return None
    if state is JobState.RUNNING and attempt == stored.attempt:
        return None
    return stored.attempt, state.value if attempt == stored.attempt else JobState.REQUEUED.value
