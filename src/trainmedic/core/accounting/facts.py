"""What the accounting reads: what was observed of a job, as plain frozen values.

The shell (``trainmedic.store.facts``) builds these from the store's records; the accounting
never reads a store or a clock. Every time is Unix seconds; ``None`` means "not observed".
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.core.model import Action, Category, Kind


@dataclass(frozen=True, slots=True)
class AttemptFacts:
    """One run of the job, as the scheduler and the progress lines showed it."""

    attempt: int
    started_at: float
    ended_at: float | None = None  # when the scheduler showed it stopped
    end_state: str = ""
    nodes: tuple[str, ...] = ()
    first_iteration: int | None = None
    last_iteration: int | None = None
    first_progress_at: float | None = None
    last_progress_at: float | None = None

    def progress_span(self) -> tuple[float, float] | None:
        if self.first_progress_at is None or self.last_progress_at is None:
            return None
        return (self.first_progress_at, self.last_progress_at)


@dataclass(frozen=True, slots=True)
class CheckpointFacts:
    """One checkpoint: ``begun_at`` from the trainer's 'checkpoint begin' line (when it
    prints one), ``saved_at`` when it was complete (log line or file)."""

    attempt: int
    iteration: int
    begun_at: float | None = None
    saved_at: float | None = None

    def blocked(self) -> tuple[float, float] | None:
        """The interval training was blocked writing it, when both ends were seen."""
        if self.begun_at is None or self.saved_at is None or self.saved_at < self.begun_at:
            return None
        return (self.begun_at, self.saved_at)


@dataclass(frozen=True, slots=True)
class IncidentFacts:
    id: int
    attempt: int
    kind: Kind
    category: Category
    detected_at: float
    fault_time: float | None = None
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AdviceFacts:
    """Advice for an incident. ``monitor``: only recorded, a person acts (or not).
    ``status`` is the store's life-cycle value (recorded, pending, applying, converged,
    abandoned); ``converged_at`` is when the scheduler showed it done."""

    id: int
    attempt: int
    action: Action
    monitor: bool
    status: str
    created_at: float
    incident_id: int | None = None
    applied_at: float | None = None
    converged_at: float | None = None


@dataclass(frozen=True, slots=True)
class JobFacts:
    """Everything observed of one job. ``terminal``: the scheduler shows it finished."""

    job_id: str
    registered_at: float
    state: str = ""
    terminal: bool = False
    attempts: tuple[AttemptFacts, ...] = ()
    checkpoints: tuple[CheckpointFacts, ...] = ()
    incidents: tuple[IncidentFacts, ...] = ()
    advice: tuple[AdviceFacts, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeEventFacts:
    """One entry of a node's history (implicated in an incident, drained)."""

    node: str
    time: float
    job_id: str | None = None
    incident_id: int | None = None
    category: Category | None = None
    strong: bool = False
    drained: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class FeedbackFacts:
    """What an operator recorded about one advice (monitor-mode scorecard)."""

    advice_id: int
    time: float
    agree: bool
    action_taken: str
    category: Category | None = None  # the advice's incident's category
    advised_action: Action | None = None
