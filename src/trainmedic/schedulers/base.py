"""The scheduler interface every adapter (local, slurm, fake) implements.

Advice is intent; an adapter is actuation. Each adapter has exactly one seam through which
it talks to the outside world (a subprocess runner for Slurm, a process table for local),
so a fake stands in for it in unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from trainmedic.core.states import JobState, NodeState


@dataclass(frozen=True, slots=True)
class JobInfo:
    job_id: str
    state: JobState
    name: str = ""
    nodes: tuple[str, ...] = ()
    attempt: int = 0  # SLURM_RESTART_COUNT / restart_cnt; 0 on the first run
    excluded_nodes: tuple[str, ...] = ()
    held: bool = False
    reason: str = ""
    exit_code: int | None = None
    stdout_path: str = ""
    stderr_path: str = ""
    comment: str = ""
    partition: str = ""
    user: str = ""


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    state: NodeState
    drain: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """One poll of the scheduler. ``stale`` means the poll failed: nothing here is news."""

    time: float
    jobs: tuple[JobInfo, ...] = ()
    nodes: tuple[NodeInfo, ...] = ()
    stale: bool = False
    error: str = ""


DRAIN_REASON_PREFIX = "trainmedic:"


class SchedulerAdapter(Protocol):
    """What the executor and the poller need from a scheduler.

    Every mutating call is idempotent: calling it again when the scheduler already shows the
    effect does nothing. Errors are raised as ``trainmedic.core.errors.SchedulerError``.
    """

    name: str

    def poll(self, job_ids: Sequence[str]) -> ClusterSnapshot:
        """One batched observation of the given jobs and of all nodes; never raises."""
        ...

    def requeue(self, job_id: str, exclude_nodes: Sequence[str]) -> None:
        """Stop the job if running and queue it again, excluding these nodes. A held job
        (a requeue cut short after its hold) gets the exclusions and is released, without
        another requeue."""
        ...

    def hold(self, job_id: str) -> None:
        """Requeue the job and keep it held (not schedulable) until ``release``."""
        ...

    def release(self, job_id: str) -> None: ...

    def cancel(self, job_id: str, reason: str) -> None:
        """Stop the job for good."""
        ...

    def drain(self, node: str, reason: str) -> bool:
        """Drain a node with a ``trainmedic:`` reason; False when another owner's drain stands."""
        ...

    def resume_node(self, node: str) -> None: ...
