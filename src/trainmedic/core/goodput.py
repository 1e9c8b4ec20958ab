"""Goodput: the one definition, used by the accounting, the metrics, the API, the CLI report,
the web view and the demo's report.

goodput (ETTR) = productive time / wall time, in [0, 1]. Productive time is the time attempts
spent between their first and their latest reported training step, less the time training
was blocked writing checkpoints and less the work that a failure threw away (the steps since
the last checkpoint before it), clipped to the window. Start-up, queueing, shutdown,
detection, decision and restart are not productive: they lie outside the progress spans.
Google's ML Goodput counts the same way. ``None`` means "not measured" (no wall time), never 0.

The interval arithmetic lives here too (the accounting builds every figure from it), so the
definition cannot drift between callers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Interval = tuple[float, float]
"""(start, end), Unix seconds, start <= end."""

ProgressSpan = Interval
"""(first progress, last progress) of one attempt."""


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, non-overlapping intervals covering the same time; empty ones dropped."""
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def clip(intervals: Iterable[Interval], start: float, end: float) -> list[Interval]:
    """The parts of ``intervals`` inside [start, end], merged."""
    return union((max(s, start), min(e, end)) for s, e in intervals)


def subtract(intervals: Iterable[Interval], removed: Iterable[Interval]) -> list[Interval]:
    """``intervals`` less every instant covered by ``removed``."""
    out: list[Interval] = []
    holes = union(removed)
    for start, end in union(intervals):
        cursor = start
        for h_start, h_end in holes:
            if h_end <= cursor or h_start >= end:
                continue
            if h_start > cursor:
                out.append((cursor, h_start))
            cursor = max(cursor, h_end)
        if cursor < end:
            out.append((cursor, end))
    return out


def length(intervals: Iterable[Interval]) -> float:
    return sum(end - start for start, end in union(intervals))


def productive_intervals(
    spans: Iterable[ProgressSpan], blocked: Sequence[Interval] = ()
) -> list[Interval]:
    """Progress spans less the ``blocked`` time (checkpoint writes, lost work)."""
    return subtract(spans, blocked)


def goodput(
    spans: Iterable[ProgressSpan], start: float, end: float, blocked: Sequence[Interval] = ()
) -> float | None:
    """Productive time within [start, end] over its length; None if the window is empty."""
    wall = end - start
    if wall <= 0:
        return None
    productive = length(clip(productive_intervals(spans, blocked), start, end))
    return min(1.0, max(0.0, productive / wall))
