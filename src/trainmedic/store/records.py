"""What the store hands back: frozen records, one per table row, and the advice life cycle.

Timestamps are Unix seconds (floats) chosen by the caller: the store never reads a clock, so
the service, the simulator and the tests decide what "now" is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from trainmedic.core.model import Action, Category, Event, Implicated, Kind


class AdviceMode(StrEnum):
    """``monitor``: advice is only recorded. ``action``: an executor carries it out."""

    MONITOR = "monitor"
    ACTION = "action"


class AdviceStatus(StrEnum):
    """Life cycle of one advice row.

    ==========  ============================================================================
    recorded    monitor mode: kept for people and metrics; nobody acts on it (terminal)
    pending     action mode: waiting for an executor to claim it
    applying    claimed by exactly one executor; scheduler steps being issued, or issued
                and waiting for the scheduler to show the effect (``applied_at`` is set when
                every step has been issued)
    converged   the scheduler shows the intended state (terminal)
    abandoned   given up: superseded by a newer generation, failed, or released by the
                watchdog (terminal)
    ==========  ============================================================================
    """

    RECORDED = "recorded"
    PENDING = "pending"
    APPLYING = "applying"
    CONVERGED = "converged"
    ABANDONED = "abandoned"

    def is_active(self) -> bool:
        """True while an executor still has something to do."""
        return self in (AdviceStatus.PENDING, AdviceStatus.APPLYING)

    def is_terminal(self) -> bool:
        return self in (AdviceStatus.RECORDED, AdviceStatus.CONVERGED, AdviceStatus.ABANDONED)


ADVICE_TRANSITIONS: dict[AdviceStatus, frozenset[AdviceStatus]] = {
    AdviceStatus.RECORDED: frozenset(),
    AdviceStatus.PENDING: frozenset({AdviceStatus.APPLYING, AdviceStatus.ABANDONED}),
    # applying -> pending hands a claim back (an executor that cannot act right now).
    AdviceStatus.APPLYING: frozenset(
        {AdviceStatus.PENDING, AdviceStatus.CONVERGED, AdviceStatus.ABANDONED}
    ),
    AdviceStatus.CONVERGED: frozenset(),
    AdviceStatus.ABANDONED: frozenset(),
}
"""Allowed ``set_advice_status`` moves; setting the current status again is a no-op."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What trainmedic needs to watch one job, as registered (stored as JSON).

    ``kernel_logs`` maps a node name to that node's kernel-log file; ``policy`` holds
    per-job overrides of the ``[policy]`` config section (validated by
    ``trainmedic.service.config.apply_policy_overrides`` before it gets here).
    """

    log_paths: tuple[str, ...] = ()
    kernel_logs: dict[str, str] = field(default_factory=dict)
    checkpoint_dir: str = ""
    nodes: tuple[str, ...] = ()
    partition: str = ""
    user: str = ""
    policy: dict[str, Any] = field(default_factory=dict)
    progress_regex: str = ""
    """The job's own progress format (``core.logparse.declared``); "" = the known formats."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    scheduler: str
    name: str
    spec: JobSpec
    registered_at: float
    state: str  # a schedulers.base.JobState value, or "" before the first poll
    attempt: int
    last_progress_at: float | None
    last_iteration: int | None
    last_checkpoint_iteration: int | None
    last_checkpoint_at: float | None


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    job_id: str
    attempt: int
    started_at: float
    ended_at: float | None
    nodes: tuple[str, ...]
    end_state: str
    first_iteration: int | None
    last_iteration: int | None
    first_progress_at: float | None
    last_progress_at: float | None


@dataclass(frozen=True, slots=True)
class IncidentRecord:
    """One stored verdict with its evidence. ``fault_time`` is None when not known."""

    id: int
    job_id: str
    attempt: int
    kind: Kind
    category: Category
    confidence: float
    fault_time: float | None
    detected_at: float
    root_cause: Event | None
    implicated: Implicated
    evidence: tuple[Event, ...]
    cascades: tuple[Event, ...]
    basis: str


@dataclass(frozen=True, slots=True)
class AdviceRecord:
    id: int
    job_id: str
    attempt: int
    generation: int
    incident_id: int | None
    action: Action
    exclude_nodes: tuple[str, ...]
    drain_nodes: tuple[str, ...]
    basis: str
    mode: AdviceMode
    status: AdviceStatus
    created_at: float
    applied_at: float | None
    converged_at: float | None
    claimed_by: str | None
    steps_done: tuple[str, ...]
    note: str


@dataclass(frozen=True, slots=True)
class HoldRecord:
    id: int
    job_id: str
    held_at: float
    released_at: float | None
    by: str


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """One entry of a node's history: implicated in an incident, drained, resumed."""

    id: int
    node: str
    time: float
    job_id: str | None
    incident_id: int | None
    category: Category | None
    strong: bool
    drained: bool
    reason: str


@dataclass(frozen=True, slots=True)
class BreakerState:
    """The drain circuit breaker: tripped (drains are advice only) until an operator resets it."""

    tripped: bool
    tripped_at: float | None = None  # the open trip
    reason: str = ""
    reset_at: float | None = None  # the last reset; drains before it no longer count
    reset_by: str = ""


@dataclass(frozen=True, slots=True)
class NodeHistoryEntry:
    """A node-history row to write with another change, in its transaction."""

    node: str
    time: float
    job_id: str | None = None
    incident_id: int | None = None
    drained: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class FollowerOffset:
    """Where the service left one followed file (``sources.offsets.FilePosition``)."""

    path: str
    device: int
    inode: int
    head_len: int
    head_hash: str
    offset: int
    line_no: int
    saved_at: float


@dataclass(frozen=True, slots=True)
class ProgressWrite:
    """One job's progress or saved checkpoint, for ``record_progress`` (one transaction for
    a whole cycle's writes): a step (``progress_at`` + ``iteration``, also written to the
    job's current attempt) or a checkpoint (``checkpoint_iteration`` + ``checkpoint_at``)."""

    job_id: str
    progress_at: float | None = None
    iteration: int | None = None
    checkpoint_iteration: int | None = None
    checkpoint_at: float | None = None


@dataclass(frozen=True, slots=True)
class JobStateChange:
    """What a scheduler poll at ``at`` changed of one job, for ``record_job_states``: the
    stored attempt that stopped (``ended``: its number and end state), the job's new state
    and attempt (``state`` None: both left as stored, an ending held back until the
    findings it led to are stored), and whether that attempt started running (on ``nodes``)."""

    job_id: str
    state: str | None
    attempt: int
    at: float
    nodes: tuple[str, ...] = ()
    ended: tuple[int, str] | None = None
    started: bool = False
