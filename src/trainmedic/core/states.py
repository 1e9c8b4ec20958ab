"""Job and node states as schedulers report them (Slurm's names; the local backend maps onto
them). In the core because detection reads them; the scheduler adapters produce them."""

from __future__ import annotations

from enum import StrEnum


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
