"""The scheduler interface every adapter (local, slurm, fake) implements.

Advice is intent; an adapter is actuation. Each adapter has exactly one seam through which
it talks to the outside world (a subprocess runner for Slurm, a process table for local),
so a fake stands in for it in unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class JobState(StrEnum):
    """A job's state as the scheduler reports it (Slurm's names; local maps onto them)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    REQUEUED = "REQUEUED"
    SUSPENDED = "SUSPENDED"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    UNKNOWN = "UNKNOWN"

    def is_terminal(self) -> bool:
        """True when the job will not run again unless someone requeues it."""
        return self in _TERMINAL

    def is_failure(self) -> bool:
        return self in _FAILURE


_TERMINAL = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.PREEMPTED,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
    }
)
_FAILURE = _TERMINAL - {JobState.COMPLETED, JobState.CANCELLED}


class NodeState(StrEnum):
    """A node's base state; drain is a separate flag (a draining node may still be busy)."""

    IDLE = "IDLE"
    ALLOCATED = "ALLOCATED"
    MIXED = "MIXED"
    DOWN = "DOWN"
    FAIL = "FAIL"
    NOT_RESPONDING = "NOT_RESPONDING"
    UNKNOWN = "UNKNOWN"

    def is_unhealthy(self) -> bool:
        return self in (NodeState.DOWN, NodeState.FAIL, NodeState.NOT_RESPONDING)


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
