"""The job page's timeline: attempts laid out on the job's wall time, their incidents with
verdict, evidence and advice, and each interruption's phases for the chart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainmedic.core.accounting import AttemptAccount, Interruption, JobAccounting
from trainmedic.store import AdviceMode, AdviceRecord, AdviceStatus, FeedbackRecord, IncidentRecord


@dataclass(frozen=True, slots=True)
class AdviceView:
    advice: AdviceRecord
    done: str  # whether the scheduler shows it done, in words
    done_ok: bool
    feedback: tuple[FeedbackRecord, ...]


@dataclass(frozen=True, slots=True)
class IncidentView:
    incident: IncidentRecord
    left: float  # percent of the job's wall time
    advice: tuple[AdviceView, ...]


@dataclass(frozen=True, slots=True)
class AttemptRow:
    attempt: AttemptAccount
    left: float
    width: float
    spans: tuple[tuple[float, float], ...]  # productive segments: (left %, width %)
    incidents: tuple[IncidentView, ...]


@dataclass(frozen=True, slots=True)
class JobTimeline:
    start: float
    end: float
    rows: tuple[AttemptRow, ...]
    phases: tuple[list[dict[str, Any]], ...] = field(default=())


def advice_state(advice: AdviceRecord) -> tuple[str, bool]:
    if advice.mode is AdviceMode.MONITOR:
        return "monitor mode: recorded for a person, not carried out by trainmedic", False
    if advice.status is AdviceStatus.CONVERGED:
        return "the scheduler shows it done", True
    if advice.status is AdviceStatus.ABANDONED:
        return f"abandoned: {advice.note or 'no reason recorded'}", False
    if advice.applied_at is not None:
        return "every step issued; waiting for the scheduler to show it", False
    return f"{advice.status.value}: not yet carried out", False


def _phases(gap: Interruption) -> list[dict[str, Any]]:
    """The issue's phases as intervals in seconds from the last progress (they may overlap)."""
    origin = gap.window[0]
    lost = gap.lost_interval or (None, None)
    spans: dict[str, tuple[float | None, float | None]] = {
        "lost_work": lost,
        "shutdown": (gap.last_progress_at, gap.stopped_at),
        "detection": (gap.fault_at, gap.detected_at),
        "decision_action": (gap.detected_at, gap.action_done_at),
        "restart": (gap.running_again_at, gap.productive_again_at),
    }
    out = []
    for part, (start, end) in spans.items():
        if start is None or end is None:
            continue
        out.append({"part": part, "start": round(start - origin, 3), "end": round(end - origin, 3)})
    return out


def job_timeline(
    account: JobAccounting,
    incidents: list[IncidentRecord],
    advice: list[AdviceRecord],
    feedback: list[FeedbackRecord],
) -> JobTimeline:
    start, end = account.start, max(account.end, account.start + 1e-9)
    wall = end - start

    def pos(t: float) -> float:
        return round(100.0 * min(max(t - start, 0.0), wall) / wall, 3)

    productive = [s for s in account.segments if s.part.value == "productive"]
    rows = []
    for attempt in account.attempts:
        a_end = attempt.ended_at if attempt.ended_at is not None else end
        spans = tuple(
            (pos(s.start), round(pos(s.end) - pos(s.start), 3))
            for s in productive
            if s.start >= attempt.started_at and s.end <= a_end
        )
        views = []
        for incident in (i for i in incidents if i.attempt == attempt.attempt):
            mine = []
            for a in (a for a in advice if a.incident_id == incident.id):
                words, ok = advice_state(a)
                answers = tuple(f for f in feedback if f.advice_id == a.id)
                mine.append(AdviceView(a, words, ok, answers))
            views.append(IncidentView(incident, pos(incident.detected_at), tuple(mine)))
        rows.append(
            AttemptRow(
                attempt=attempt,
                left=pos(attempt.started_at),
                width=round(pos(a_end) - pos(attempt.started_at), 3),
                spans=spans,
                incidents=tuple(views),
            )
        )
    return JobTimeline(start, end, tuple(rows), tuple(_phases(g) for g in account.interruptions))
