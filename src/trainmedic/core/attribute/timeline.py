"""Time structure as evidence: how progress and loss moved, not what one line said.

* **stalled while running**: progress stopped, and afterwards the scheduler or a monitor kept
  reporting the job as running for far longer than its cadence (``STALL_FACTOR`` steps, at
  least ``STALL_MIN_S``; ``STALL_NO_CADENCE_S`` when the cadence is unknown): a hang. With no
  error and no timeout printed, what the threads find is most often the program (a
  DataLoader deadlock, ranks waiting in different collectives), so the verdict is a
  low-confidence application hang.
* **the loss diverged**: it jumped to ``SPIKE_RATIO`` times its lowest value so far late in the
  run and did not come back, or collapsed to exactly 0 and stayed there, or became non-finite:
  the optimisation broke (the job's data, learning rate or precision). A spike or non-finite
  loss at the *same iteration again* after a restart from a checkpoint is deterministic,
  hence more certain.

A planned exit (a job ending itself at its wall-time budget) is read from the line that says so
(the catalogue's ``wrapper.planned_exit``): the time structure alone cannot tell a budget from
a crash.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.logparse.timeline import Point, Timeline
from trainmedic.core.model import Category, Kind

STALL_FACTOR = 10.0
STALL_MIN_S = 1800.0
STALL_NO_CADENCE_S = 3600.0
SPIKE_RATIO = 1.5
SPIKE_MIN_LOSS = 0.05
RECOVERED_RATIO = 1.1
LATE_ITERATION = 100
LATE_POINTS = 5
COLLAPSED_POINTS = 3
BARE_FINITE_BEFORE = 3
"""A bare "step value" series counts as a loss that broke only after this many finite values
and when every value from the first non-finite one on stays non-finite (at least two): a
table with one missing cell is no divergence."""


def _cadence(points: Sequence[Point]) -> float | None:
    """Seconds per progress report, from stamped reports or the printed step time."""
    stamped = [p for p in points if p.timestamp is not None and p.iteration is not None]
    gaps = [
        b.timestamp - a.timestamp
        for a, b in itertools.pairwise(stamped)
        if a.timestamp is not None and b.timestamp is not None and b.timestamp > a.timestamp
    ]
    if gaps:
        return statistics.median(gaps)
    steps = [p.step_time for p in points if p.step_time]
    return steps[-1] if steps else None


def stalled_while_running(timelines: Sequence[Timeline]) -> PhaseFinding | None:
    for tl in timelines:
        progress = [p for p in tl.points if p.iteration is not None]
        if not progress:
            continue
        last = max(progress, key=lambda p: p.line)
        after = [(line, ts) for line, ts in tl.running if line > last.line and ts is not None]
        if len(after) < 2:
            continue
        cadence = _cadence(progress)
        start = last.timestamp if last.timestamp is not None else after[0][1]
        end = after[-1][1]
        if start is None or end is None:
            continue
        span = end - start
        limit = max(STALL_FACTOR * cadence, STALL_MIN_S) if cadence else STALL_NO_CADENCE_S
        if span < limit:
            continue
        pace = f"cadence ~{cadence:.0f} s" if cadence else "cadence unknown"
        return PhaseFinding(
            Category.APPLICATION,
            Kind.HANG,
            0.35,
            f"progress stopped at iteration {last.iteration} (line {last.line}) while the job "
            f"was still reported running {span / 3600:.1f} h later ({len(after)} reports, "
            f"{pace}): a hang; no error and no timeout were printed, which is what a deadlock "
            "in the program (DataLoader, ranks in different collectives) looks like",
        )
    return None


def _segments(points: Sequence[Point]) -> list[list[Point]]:
    """Runs of points between restarts (the iteration counter going back)."""
    out: list[list[Point]] = [[]]
    last_it: int | None = None
    for p in points:
        if p.iteration is not None and last_it is not None and p.iteration < last_it:
            out.append([])
        out[-1].append(p)
        if p.iteration is not None:
            last_it = p.iteration
    return [s for s in out if s]


def _bare_broke(losses: Sequence[Point], k: int) -> bool:
    """Whether the bare series broke for good at ``losses[k]`` (see BARE_FINITE_BEFORE)."""
    before = [p for p in losses[:k] if p.bare and p.loss is not None and math.isfinite(p.loss)]
    after = [p for p in losses[k:] if p.bare]
    return (
        len(before) >= BARE_FINITE_BEFORE
        and len(after) >= 2
        and all(p.loss is not None and not math.isfinite(p.loss) for p in after)
    )


def _spike(points: Sequence[Point]) -> Point | None:
    losses = [p for p in points if p.loss is not None]
    for k in range(1, len(losses)):
        point, loss = losses[k], losses[k].loss
        if loss is None:
            continue
        if not math.isfinite(loss):
            if point.bare and not _bare_broke(losses, k):
                continue
            return point
        finite = [
            p.loss
            for p in losses[:k]
            if p.loss is not None and math.isfinite(p.loss) and not p.bare
        ]
        if point.bare or not finite:
            continue  # a bare value is some metric: its jumps say nothing
        base = min(finite)
        late = (point.iteration or 0) >= LATE_ITERATION or k >= LATE_POINTS
        if base < SPIKE_MIN_LOSS or loss < SPIKE_RATIO * base or not late:
            continue
        final = losses[-1].loss
        if final is not None and (not math.isfinite(final) or final >= RECOVERED_RATIO * base):
            return point
    return None


def _collapse(points: Sequence[Point]) -> Point | None:
    losses = [p for p in points if p.loss is not None and not p.bare]
    for k in range(1, len(losses) - COLLAPSED_POINTS + 1):
        before = [p.loss for p in losses[:k] if p.loss is not None]
        run = losses[k : k + COLLAPSED_POINTS]
        rest = losses[k:]
        if max(before) > SPIKE_MIN_LOSS and all(p.loss == 0.0 for p in run + rest[-1:]):
            return run[0]
    return None


def loss_diverged(timelines: Sequence[Timeline]) -> PhaseFinding | None:
    for tl in timelines:
        segments = _segments(tl.points)
        spikes = [(s, _spike(s)) for s in segments]
        found = [(s, p) for s, p in spikes if p is not None]
        if found:
            point = found[0][1]
            where = f"iteration {point.iteration}" if point.iteration is not None else "a step"
            repeats = [
                p
                for _, p in found[1:]
                if point.iteration is not None
                and p.iteration is not None
                and abs(p.iteration - point.iteration) <= max(5, point.iteration // 50)
            ]
            if repeats:
                return PhaseFinding(
                    Category.APPLICATION,
                    Kind.CRASH,
                    0.6,
                    f"the loss broke at {where} and again at iteration {repeats[0].iteration} "
                    "after a restart: a divergence that repeats from the checkpoint is the "
                    "job's own (data, learning rate, precision)",
                )
            return PhaseFinding(
                Category.APPLICATION,
                Kind.CRASH,
                0.4,
                f"the loss jumped at {where} (line {point.line}: {point.loss}) to at least "
                f"{SPIKE_RATIO}x its lowest value and did not come back: the optimisation "
                "diverged (learning rate, data, precision)",
            )
        for segment in segments:
            collapsed = _collapse(segment)
            if collapsed is not None:
                return PhaseFinding(
                    Category.APPLICATION,
                    Kind.CRASH,
                    0.4,
                    f"the loss collapsed to exactly 0 from line {collapsed.line} on and stayed "
                    "there: the training broke (fp16 overflow, a masked or empty loss)",
                )
    return None
