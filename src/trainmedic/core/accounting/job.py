"""A job's accounting: where its wall time went, per attempt and per interruption.

The wall time (registration -> the job's end, or now) is partitioned into segments, each
labelled with a ``Part`` and, for badput caused by an interruption, the category of the
incident behind it. Precedence decides overlaps: checkpoint writes, then lost work, then
productive time (``core.goodput``), then each interruption's slices, then start-up (before the
first progress), then ``other`` (whatever nothing explains). Windowed figures (the cluster's
last day or week) clip the segments, so every view adds up the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trainmedic.core.accounting.facts import AttemptFacts, JobFacts
from trainmedic.core.accounting.interruptions import (
    Interruption,
    Part,
    interruption,
)
from trainmedic.core.goodput import Interval, clip, goodput, length, productive_intervals, subtract
from trainmedic.core.model import Category, Kind
from trainmedic.core.states import JobState

CAUSES: tuple[str, ...] = (*(c.value for c in Category), "unattributed")
"""Badput causes: the eight categories, and interruptions no incident explains."""


@dataclass(frozen=True, slots=True)
class Segment:
    start: float
    end: float
    part: Part
    cause: str | None  # a CAUSES value for an interruption's badput, else None
    attempt: int | None


@dataclass(frozen=True, slots=True)
class AttemptAccount:
    attempt: int
    started_at: float
    ended_at: float | None
    end_state: str
    nodes: tuple[str, ...]
    first_iteration: int | None
    last_iteration: int | None
    productive_s: float | None  # None: no progress seen in this attempt
    checkpoint_s: float | None  # None: no checkpoint write with both ends seen
    checkpoints: int
    incident_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class JobAccounting:
    job_id: str
    start: float
    end: float
    ongoing: bool
    wall_s: float
    productive_s: float
    goodput: float | None
    checkpoint_s: float | None
    checkpoints_measured: int
    checkpoints_unmeasured: int
    lost_work_s: float | None
    attempts: tuple[AttemptAccount, ...]
    interruptions: tuple[Interruption, ...]
    segments: tuple[Segment, ...]

    def by_part(self, start: float | None = None, end: float | None = None) -> dict[str, float]:
        """Seconds per ``Part`` (productive included) within [start, end]."""
        return by_part(self.segments, start, end)

    def goodput_within(self, start: float, end: float) -> float | None:
        """Productive time inside [start, end] over its length (``core.goodput``'s ratio)."""
        if end <= start:
            return None
        return self.by_part(start, end)[Part.PRODUCTIVE.value] / (end - start)

    def by_cause(self, start: float | None = None, end: float | None = None) -> dict[str, float]:
        """Badput seconds of interruptions per cause within [start, end]."""
        return by_cause(self.segments, start, end)


def _clipped(segment: Segment, start: float | None, end: float | None) -> float:
    lo = segment.start if start is None else max(segment.start, start)
    hi = segment.end if end is None else min(segment.end, end)
    return max(0.0, hi - lo)


def by_part(
    segments: Iterable[Segment], start: float | None = None, end: float | None = None
) -> dict[str, float]:
    out = {p.value: 0.0 for p in Part}
    for s in segments:
        out[s.part.value] += _clipped(s, start, end)
    return out


def by_cause(
    segments: Iterable[Segment], start: float | None = None, end: float | None = None
) -> dict[str, float]:
    out = dict.fromkeys(CAUSES, 0.0)
    for s in segments:
        if s.cause is not None:
            out[s.cause] += _clipped(s, start, end)
    return out


def _job_end(job: JobFacts, now: float) -> float:
    """A finished job's end: its last attempt's stop (or, not recorded, its last progress),
    so its goodput does not decay after it finished."""
    if not job.terminal or not job.attempts:
        return now
    last = max(job.attempts, key=lambda a: a.attempt)
    ends = [t for t in (last.ended_at, last.last_progress_at, last.started_at) if t is not None]
    return max(ends[0], job.registered_at)


def _interrupted(job: JobFacts, attempt: AttemptFacts, is_last: bool) -> bool:
    """An attempt that stopped training: a later attempt exists, or the job ended in failure,
    or a crash/hang incident stands against the last one. A job its owner cancelled (or that
    completed) with no such incident simply ended."""
    if not is_last:
        return True
    if job.terminal and _failed(job.state):
        return True
    # Progress after the incident: the attempt kept training (a false alarm, or it recovered).
    last = attempt.last_progress_at if attempt.last_progress_at is not None else float("-inf")
    return any(
        i.attempt == attempt.attempt and i.kind in (Kind.CRASH, Kind.HANG) and i.detected_at >= last
        for i in job.incidents
    )


def _failed(state: str) -> bool:
    try:
        return JobState(state).is_failure()
    except ValueError:
        return False


def _interruptions(job: JobFacts, attempts: list[AttemptFacts], end: float) -> list[Interruption]:
    out: list[Interruption] = []
    for index, attempt in enumerate(attempts):
        is_last = index == len(attempts) - 1
        if not _interrupted(job, attempt, is_last):
            continue
        following = attempts[index + 1] if not is_last else None
        window_end = end
        if following is not None and following.first_progress_at is None:
            # The next attempt never trained: its own interruption takes over at its start,
            # unless it is the current one, still starting up.
            after_it = index + 1 < len(attempts) - 1
            if after_it or _interrupted(job, following, index + 1 == len(attempts) - 1):
                window_end = following.started_at
        out.append(interruption(job, attempt, following, min(end, window_end)))
    return out


def account_job(job: JobFacts, now: float) -> JobAccounting:
    """Where ``job``'s wall time went, from registration to its end (or ``now``)."""
    attempts = sorted(job.attempts, key=lambda a: a.attempt)
    start, end = job.registered_at, max(job.registered_at, _job_end(job, now))
    interruptions = _interruptions(job, attempts, end)
    spans = [s for a in attempts if (s := a.progress_span()) is not None]
    blocked_ckpt = [b for c in job.checkpoints if (b := c.blocked()) is not None]
    checkpoint_time = clip(
        [i for span in spans for i in clip(blocked_ckpt, span[0], span[1])], start, end
    )
    lost = subtract(
        clip([i.lost_interval for i in interruptions if i.lost_interval], start, end),
        checkpoint_time,
    )
    productive = clip(productive_intervals(spans, [*checkpoint_time, *lost]), start, end)

    segments: list[Segment] = []
    taken: list[Interval] = []

    def assign(
        intervals: Iterable[Interval], part: Part, cause: str | None, attempt: int | None
    ) -> None:
        for s, e in subtract(clip(intervals, start, end), taken):
            segments.append(Segment(s, e, part, cause, attempt))
        taken.extend(clip(intervals, start, end))

    assign(checkpoint_time, Part.CHECKPOINT, None, None)
    for gap in interruptions:
        if gap.lost_interval is not None:
            assign([gap.lost_interval], Part.LOST_WORK, gap.category, gap.attempt)
    assign(productive, Part.PRODUCTIVE, None, None)
    for gap in interruptions:
        for part, interval in gap.slices:
            assign([interval], part, gap.category, gap.attempt)
    first_progress = min((s[0] for s in spans), default=end)
    assign([(start, first_progress)], Part.STARTUP, None, None)
    assign([(start, end)], Part.OTHER, None, None)
    segments.sort(key=lambda s: s.start)

    measured = [c for c in job.checkpoints if c.blocked() is not None]
    lost_known = [i.lost_work_s for i in interruptions if i.lost_work_s is not None]
    return JobAccounting(
        job_id=job.job_id,
        start=start,
        end=end,
        ongoing=not job.terminal,
        wall_s=end - start,
        productive_s=length(productive),
        goodput=goodput(spans, start, end, [*checkpoint_time, *lost]),
        checkpoint_s=length(checkpoint_time) if measured else None,
        checkpoints_measured=len(measured),
        checkpoints_unmeasured=len(job.checkpoints) - len(measured),
        lost_work_s=sum(lost_known) if lost_known or not interruptions else None,
        attempts=tuple(_attempt_account(job, a, productive, checkpoint_time) for a in attempts),
        interruptions=tuple(interruptions),
        segments=tuple(segments),
    )


def _attempt_account(
    job: JobFacts, attempt: AttemptFacts, productive: list[Interval], checkpoint: list[Interval]
) -> AttemptAccount:
    span = attempt.progress_span()
    mine = [c for c in job.checkpoints if c.attempt == attempt.attempt]
    measured = [c for c in mine if c.blocked() is not None]
    return AttemptAccount(
        attempt=attempt.attempt,
        started_at=attempt.started_at,
        ended_at=attempt.ended_at,
        end_state=attempt.end_state,
        nodes=attempt.nodes,
        first_iteration=attempt.first_iteration,
        last_iteration=attempt.last_iteration,
        productive_s=None if span is None else length(clip(productive, *span)),
        checkpoint_s=length(clip(checkpoint, *span)) if span and measured else None,
        checkpoints=len(mine),
        incident_ids=tuple(i.id for i in job.incidents if i.attempt == attempt.attempt),
    )
