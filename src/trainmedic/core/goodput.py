"""Goodput: the one definition, used by the metrics, the API and the demo's report.

goodput = productive time / wall time, in [0, 1], where productive time is the time each
attempt spent between its first and its latest reported training step, clipped to the window
(Google's ML Goodput counts the same way: start-up, queueing, detection and recovery are not
productive). Steps recomputed after a resume count as productive here; lost work is accounted
as such by the downtime breakdown, not by this ratio. ``None`` means "not measured" (no wall
time), never 0.
"""

from __future__ import annotations

from collections.abc import Iterable

ProgressSpan = tuple[float, float]
"""(first progress, last progress) of one attempt, Unix seconds."""


def goodput(spans: Iterable[ProgressSpan], start: float, end: float) -> float | None:
    """Productive time within [start, end] over its length; None if the window is empty."""
    wall = end - start
    if wall <= 0:
        return None
    productive = sum(max(0.0, min(last, end) - max(first, start)) for first, last in spans)
    return min(1.0, max(0.0, productive / wall))
