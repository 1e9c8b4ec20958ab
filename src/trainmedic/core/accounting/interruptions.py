"""One interruption: an attempt that stopped training, from its last progress to the first
progress of the attempt after it (or to the job's end, or to now while it lasts).

The issue's six figures, each from its own observed inputs (``None``: an input is missing,
"not measured", never 0):

==================  ===========================================================================
lost_work_s         iterations since the last checkpoint before the failure x step time
shutdown_s          last progress -> the scheduler showed the attempt stopped
detection_s         the failure (the incident's fault time) -> our incident
decision_action_s   the incident -> the scheduler showed the advice done (action mode: the
                    advice converged; monitor mode: the next attempt running, or the job ended)
human_wait_s        the part of decision_action_s spent waiting for a person (monitor mode:
                    all of it; action mode: 0)
restart_s           running again -> first progress of the next attempt
==================  ===========================================================================

These overlap in time (a crashed job shuts down while we detect it; a hung one only stops
when the action kills it), so the badput totals use a partition of the interruption's window
instead, in the order things must happen: last progress -> detected (``detection``) -> running
again (``decision_action``, or ``human_wait`` in monitor mode) -> first progress
(``restart``). ``Interruption.slices`` is that partition; checkpoint time sits inside the
attempts' progress spans and lost work just before the window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from trainmedic.core.accounting.facts import (
    AdviceFacts,
    AttemptFacts,
    CheckpointFacts,
    IncidentFacts,
    JobFacts,
)
from trainmedic.core.goodput import Interval, length
from trainmedic.core.model import Kind


class Part(StrEnum):
    """Where a second of a job's wall time went (a partition of the wall time)."""

    PRODUCTIVE = "productive"
    CHECKPOINT = "checkpoint"
    LOST_WORK = "lost_work"
    DETECTION = "detection"
    DECISION_ACTION = "decision_action"
    HUMAN_WAIT = "human_wait"
    RESTART = "restart"
    STARTUP = "startup"
    OTHER = "other"


BADPUT_PARTS = tuple(p for p in Part if p is not Part.PRODUCTIVE)
UNATTRIBUTED = "unattributed"
"""Badput of an interruption no incident explains (e.g. a requeue nobody asked us about)."""


@dataclass(frozen=True, slots=True)
class Interruption:
    attempt: int
    next_attempt: int | None
    open: bool  # still going on: no next attempt yet and the job not finished
    category: str  # the primary incident's category, or UNATTRIBUTED
    kind: str  # the primary incident's kind, or ""
    incident_ids: tuple[int, ...]
    advice_id: int | None
    action: str | None
    monitor: bool | None
    last_progress_at: float | None
    last_iteration: int | None
    resumed_from_iteration: int | None  # the last checkpoint before the failure
    lost_basis: str | None  # "checkpoint" | "resume point" (next attempt's first step)
    fault_at: float | None
    detected_at: float | None
    stopped_at: float | None
    action_done_at: float | None
    running_again_at: float | None
    productive_again_at: float | None
    window: Interval  # the downtime window (last progress -> productive again / end / now)
    step_time_s: float | None
    lost_iterations: int | None
    lost_work_s: float | None
    shutdown_s: float | None
    detection_s: float | None
    decision_action_s: float | None
    human_wait_s: float | None
    restart_s: float | None
    lost_interval: Interval | None
    slices: tuple[tuple[Part, Interval], ...] = field(default=())

    @property
    def downtime_s(self) -> float:
        return self.window[1] - self.window[0]

    def badput_s(self) -> float | None:
        """Downtime plus lost work; None when the lost work is not measured."""
        if self.lost_work_s is None:
            return None
        return self.downtime_s + self.lost_work_s


def _delta(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, end - start)


def primary_incident(incidents: list[IncidentFacts]) -> IncidentFacts | None:
    """The incident that explains an attempt's end: its first crash or hang, else its first."""
    ordered = sorted(incidents, key=lambda i: (i.detected_at, i.id))
    stops = [i for i in ordered if i.kind in (Kind.CRASH, Kind.HANG)]
    chosen = stops or ordered
    return chosen[0] if chosen else None


def step_time(attempt: AttemptFacts, checkpoints: list[CheckpointFacts]) -> float | None:
    """Seconds per iteration over the attempt's progress span, checkpoint writes excluded."""
    span = attempt.progress_span()
    if span is None or attempt.first_iteration is None or attempt.last_iteration is None:
        return None
    steps = attempt.last_iteration - attempt.first_iteration
    if steps <= 0:
        return None
    blocked = [b for c in checkpoints if (b := c.blocked()) is not None]
    busy = span[1] - span[0] - length((max(s, span[0]), min(e, span[1])) for s, e in blocked)
    return max(0.0, busy) / steps


def resume_point(
    attempt: AttemptFacts, next_attempt: AttemptFacts | None, checkpoints: list[CheckpointFacts]
) -> tuple[int | None, str | None]:
    """The iteration work was kept up to: the newest checkpoint saved before the attempt's
    last progress, or else the next attempt's first step - 1 (where it resumed)."""
    last_at, last_iter = attempt.last_progress_at, attempt.last_iteration
    if last_at is not None and last_iter is not None:
        saved = [
            c.iteration
            for c in checkpoints
            if c.attempt <= attempt.attempt
            and c.saved_at is not None
            and c.saved_at <= last_at
            and c.iteration <= last_iter
        ]
        if saved:
            return max(saved), "checkpoint"
    if next_attempt is not None and next_attempt.first_iteration is not None:
        return next_attempt.first_iteration - 1, "resume point"
    return None, None


def _action_done(
    advice: AdviceFacts | None,
    next_attempt: AttemptFacts | None,
    stopped_at: float | None,
    terminal: bool,
) -> float | None:
    if advice is None:
        return None
    if not advice.monitor:
        return advice.converged_at
    # Monitor mode: a person acted; the scheduler shows it done when the job runs again
    # (or, for a stop, when the job ended).
    if next_attempt is not None:
        return next_attempt.started_at
    return stopped_at if terminal else None


def _advice_for(primary: IncidentFacts | None, advice: list[AdviceFacts]) -> AdviceFacts | None:
    if primary is None:
        return None
    mine = [a for a in advice if a.incident_id == primary.id]
    return min(mine, key=lambda a: a.id) if mine else None


def interruption(
    job: JobFacts,
    attempt: AttemptFacts,
    next_attempt: AttemptFacts | None,
    end: float,
) -> Interruption:
    """The interruption that ended ``attempt``. Its window ends at the next attempt's first
    progress; without one it ends at ``end`` (the job's end, now, or where the next attempt's
    own interruption begins: the caller knows which)."""
    incidents = [i for i in job.incidents if i.attempt == attempt.attempt]
    primary = primary_incident(incidents)
    advice = _advice_for(primary, [a for a in job.advice if a.attempt == attempt.attempt])
    checkpoints = [c for c in job.checkpoints if c.attempt == attempt.attempt]
    last_at = attempt.last_progress_at
    start = last_at if last_at is not None else attempt.started_at
    productive_again = next_attempt.first_progress_at if next_attempt else None
    is_open = next_attempt is None and not job.terminal
    window_end = productive_again if productive_again is not None else end
    window = (start, max(start, window_end))

    kept, basis = resume_point(attempt, next_attempt, list(job.checkpoints))
    seconds_per_step = step_time(attempt, checkpoints)
    lost_iterations = lost_s = None
    lost_interval: Interval | None = None
    if kept is not None and attempt.last_iteration is not None:
        lost_iterations = max(0, attempt.last_iteration - kept)
        if seconds_per_step is not None and last_at is not None:
            lost_s = lost_iterations * seconds_per_step
            floor = attempt.first_progress_at if attempt.first_progress_at is not None else last_at
            lost_interval = (max(floor, last_at - lost_s), last_at)

    detected = primary.detected_at if primary else None
    fault = primary.fault_time if primary else None
    stopped = attempt.ended_at
    running_again = next_attempt.started_at if next_attempt else None
    done = _action_done(advice, next_attempt, stopped, job.terminal)
    if advice is None:
        human_wait = None
    elif advice.monitor:
        human_wait = _delta(detected, done)
    else:
        human_wait = 0.0

    # The partition of the window: detection, then decision/action (or a person), then restart.
    cut_detected = min(max(detected if detected is not None else start, start), window[1])
    cut_running = running_again if running_again is not None else window[1]
    cut_running = min(max(cut_running, cut_detected), window[1])
    waiting = Part.HUMAN_WAIT if advice is not None and advice.monitor else Part.DECISION_ACTION
    slices = tuple(
        (part, interval)
        for part, interval in (
            (Part.DETECTION, (start, cut_detected)),
            (waiting, (cut_detected, cut_running)),
            (Part.RESTART, (cut_running, window[1])),
        )
        if interval[1] > interval[0]
    )
    return Interruption(
        attempt=attempt.attempt,
        next_attempt=next_attempt.attempt if next_attempt else None,
        open=is_open,
        category=primary.category.value if primary else UNATTRIBUTED,
        kind=primary.kind.value if primary else "",
        incident_ids=tuple(i.id for i in sorted(incidents, key=lambda i: i.id)),
        advice_id=advice.id if advice else None,
        action=advice.action.value if advice else None,
        monitor=advice.monitor if advice else None,
        last_progress_at=last_at,
        last_iteration=attempt.last_iteration,
        resumed_from_iteration=kept,
        lost_basis=basis,
        fault_at=fault,
        detected_at=detected,
        stopped_at=stopped,
        action_done_at=done,
        running_again_at=running_again,
        productive_again_at=productive_again,
        window=window,
        step_time_s=seconds_per_step,
        lost_iterations=lost_iterations,
        lost_work_s=lost_s,
        shutdown_s=_delta(last_at, stopped),
        detection_s=_delta(fault, detected),
        decision_action_s=_delta(detected, done),
        human_wait_s=human_wait,
        restart_s=_delta(running_again, productive_again),
        lost_interval=lost_interval,
        slices=slices,
    )
