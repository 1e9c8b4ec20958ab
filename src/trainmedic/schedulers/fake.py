"""An in-memory scheduler for fast unit tests of the executor, watchdog and service.

It behaves like the real adapters from the outside (requeue bumps the attempt and moves the
job off excluded nodes, drain refuses another owner's reason) and records every mutating
call in ``calls``, so tests can assert that an action was issued exactly once.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.base import (
    DRAIN_REASON_PREFIX,
    ClusterSnapshot,
    JobInfo,
    NodeInfo,
)


class FakeScheduler:
    name = "fake"

    def __init__(self, nodes: Sequence[str] = ("node1", "node2", "node3", "node4")) -> None:
        self.nodes: dict[str, NodeInfo] = {n: NodeInfo(n, NodeState.IDLE) for n in nodes}
        self.jobs: dict[str, JobInfo] = {}
        self.calls: list[tuple[str, ...]] = []
        self.fail_next: str | None = None  # name of a call that raises once
        self.stale = False

    def add_job(
        self, job_id: str, nodes: Sequence[str], state: JobState = JobState.RUNNING
    ) -> None:
        self.jobs[job_id] = JobInfo(job_id, state, nodes=tuple(nodes))

    def set_state(self, job_id: str, state: JobState) -> None:
        self.jobs[job_id] = dataclasses.replace(self.jobs[job_id], state=state)

    def _maybe_fail(self, call: str) -> None:
        if self.fail_next == call:
            self.fail_next = None
            raise SchedulerError(f"fake: {call} refused")

    def poll(self, job_ids: Sequence[str]) -> ClusterSnapshot:
        if self.stale:
            return ClusterSnapshot(time.time(), stale=True, error="fake: unreachable")
        jobs = tuple(self.jobs[j] for j in job_ids if j in self.jobs)
        return ClusterSnapshot(time.time(), jobs, tuple(self.nodes.values()))

    def requeue(self, job_id: str, exclude_nodes: Sequence[str]) -> None:
        self.calls.append(("requeue", job_id, *exclude_nodes))
        self._maybe_fail("requeue")
        job = self.jobs[job_id]
        excluded = set(job.excluded_nodes) | set(exclude_nodes)
        if job.held:
            # As the Slurm adapter does: a held job (a requeue cut short after its hold)
            # gets the exclusions and is released, without another attempt.
            self.jobs[job_id] = dataclasses.replace(
                job, held=False, excluded_nodes=tuple(sorted(excluded))
            )
            return
        free = [
            n
            for n, info in self.nodes.items()
            if n not in excluded and not info.drain and not info.state.is_unhealthy()
        ]
        count = len(job.nodes) or 1
        if len(free) < count:
            raise SchedulerError(f"fake: not enough nodes for job {job_id}")
        self.jobs[job_id] = dataclasses.replace(
            job,
            state=JobState.RUNNING,
            nodes=tuple(free[:count]),
            attempt=job.attempt + 1,
            excluded_nodes=tuple(sorted(excluded)),
        )

    def hold(self, job_id: str) -> None:
        self.calls.append(("hold", job_id))
        self.jobs[job_id] = dataclasses.replace(
            self.jobs[job_id], state=JobState.PENDING, held=True
        )

    def release(self, job_id: str) -> None:
        self.calls.append(("release", job_id))
        self._maybe_fail("release")
        self.jobs[job_id] = dataclasses.replace(self.jobs[job_id], held=False)

    def cancel(self, job_id: str, reason: str) -> None:
        self.calls.append(("cancel", job_id))
        self.jobs[job_id] = dataclasses.replace(self.jobs[job_id], state=JobState.CANCELLED)

    def drain(self, node: str, reason: str) -> bool:
        self.calls.append(("drain", node))
        info = self.nodes[node]
        if info.drain and not info.reason.startswith(DRAIN_REASON_PREFIX):
            return False
        self.nodes[node] = dataclasses.replace(info, drain=True, reason=reason)
        return True

    def resume_node(self, node: str) -> None:
        self.calls.append(("resume", node))
        self.nodes[node] = dataclasses.replace(self.nodes[node], drain=False, reason="")
