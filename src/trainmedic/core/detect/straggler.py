"""Straggler detection and naming.

Detection: the step time of the last few iterations *stays* above the job's own baseline
(the median of a longer, earlier window) by a ratio: the window's lower quartile, not one
sample nor even its median, must exceed it. 4 ranks on 2 cores have p90 step times 1.5-2x
the median while perfectly healthy.

Naming: in synchronous data parallelism every rank's step time rises together, so step time
cannot say who is slow. The split can: the slow rank's own compute time is high and its wait
in the gradient all-reduce low, while the others wait for it. A rank is named when its median
compute time over the window exceeds the other ranks' median by more than
``max(z x 1.4826 x MAD, rel x median, abs)`` and its median wait is no higher than theirs.
Comparing each rank with the *others* keeps this meaningful with 2 ranks, and naming every
rank that qualifies names all ranks of a slow node. A slowdown that names no rank must be
larger (``straggler_unnamed_ratio``): it is what CPU contention from other work looks like.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.detect.stats import MAD_TO_SIGMA, mad, median, quantile
from trainmedic.core.model import Kind

MIN_RANK_SAMPLES = 5


@dataclass(frozen=True, slots=True)
class RankTiming:
    """One rank's recent compute and wait times (seconds per step)."""

    rank: int
    node: str | None
    compute: tuple[float, ...]
    wait: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class SlowRank:
    rank: int
    node: str | None
    compute_s: float  # this rank's median compute time
    others_compute_s: float  # the other ranks' median of medians
    wait_s: float
    others_wait_s: float


def slowdown_ratio(
    recent: Sequence[float], baseline: Sequence[float], config: DetectorConfig
) -> float | None:
    """How far the recent window stays above the baseline: its ``straggler_quantile`` over
    the baseline median; None while the windows are too short to say."""
    if len(recent) < config.straggler_recent or len(baseline) < config.straggler_min_baseline:
        return None
    base = median(baseline)
    if base <= 0.0:
        return None
    return quantile(recent, config.straggler_quantile) / base


def find_slow_ranks(timings: Sequence[RankTiming], config: DetectorConfig) -> tuple[SlowRank, ...]:
    usable = [
        t for t in timings if len(t.compute) >= MIN_RANK_SAMPLES and len(t.wait) >= MIN_RANK_SAMPLES
    ]
    if len(usable) < 2:
        return ()
    compute = {t.rank: median(t.compute) for t in usable}
    wait = {t.rank: median(t.wait) for t in usable}
    slow: list[SlowRank] = []
    for timing in usable:
        others_c = [compute[t.rank] for t in usable if t.rank != timing.rank]
        others_w = [wait[t.rank] for t in usable if t.rank != timing.rank]
        centre_c = median(others_c)
        margin = max(
            config.culprit_z * MAD_TO_SIGMA * mad(others_c),
            config.culprit_rel * centre_c,
            config.culprit_abs_s,
        )
        centre_w = median(others_w)
        if compute[timing.rank] - centre_c > margin and wait[timing.rank] <= centre_w:
            slow.append(
                SlowRank(
                    rank=timing.rank,
                    node=timing.node,
                    compute_s=compute[timing.rank],
                    others_compute_s=centre_c,
                    wait_s=wait[timing.rank],
                    others_wait_s=centre_w,
                )
            )
    slow.sort(key=lambda s: s.compute_s - s.others_compute_s, reverse=True)
    return tuple(slow)


def check_straggler(
    *,
    job_id: str,
    now: float,
    since: float,
    recent: Sequence[float],
    baseline: Sequence[float],
    timings: Sequence[RankTiming],
    config: DetectorConfig,
    iteration: int | None = None,
) -> Anomaly | None:
    """An anomaly when the recent window is slower than the baseline by the ratio."""
    sustained = slowdown_ratio(recent, baseline, config)
    if sustained is None or sustained <= config.straggler_ratio:
        return None
    ratio = median(recent) / median(baseline)
    share = 1.0 - config.straggler_quantile
    slow = find_slow_ranks(timings, config)
    if not slow and sustained <= config.straggler_unnamed_ratio:
        return None  # every rank slower alike, and not by much: likely contention
    basis = (
        f"median step {median(recent):.4f}s over the last {len(recent)} iterations is "
        f"{ratio:.2f}x the baseline {median(baseline):.4f}s, and {share:.0%}"
        f" of them are above {config.straggler_ratio:g}x"
    )
    if slow:
        named = "; ".join(
            f"rank {s.rank}" + (f" on {s.node}" if s.node else "") + f": compute "
            f"{s.compute_s:.4f}s vs {s.others_compute_s:.4f}s, wait {s.wait_s:.4f}s vs "
            f"{s.others_wait_s:.4f}s"
            for s in slow
        )
        basis += f"; slow {named}"
    else:
        basis += "; no single rank stands out in compute vs wait time"
    nodes = tuple(dict.fromkeys(s.node for s in slow if s.node is not None))
    return Anomaly(
        kind=Kind.STRAGGLER,
        job_id=job_id,
        detected_at=now,
        since=since,
        trigger=Trigger.SLOW_STEPS,
        basis=basis,
        ranks=tuple(s.rank for s in slow),
        nodes=nodes,
        ratio=ratio,
        iteration=iteration,
    )
