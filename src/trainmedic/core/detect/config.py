"""Detector thresholds. Defaults are tuned for the CPU demo (4 gloo ranks on 2 cores)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DetectorConfig:
    # Hang: no progress for max(hang_k x p99 step time, hang_floor_s).
    hang_k: float = 6.0
    hang_floor_s: float = 5.0
    # A job that has not printed its first iteration is not hung before this grace ends
    # (imports, rendezvous, DDP set-up, checkpoint load).
    startup_grace_s: float = 60.0
    # A checkpoint in progress extends the hang window until it is saved or this cap passes.
    checkpoint_cap_s: float = 600.0
    # Recent step times kept for the p99 of the hang threshold.
    step_window: int = 200
    # Straggler: the slowdown must *stay*: the `straggler_quantile` of the last
    # `straggler_recent` step times (0.25: three steps in four) exceeds the baseline (median
    # of up to `straggler_baseline` earlier ones) by this ratio. With the median instead,
    # 6 in 100 simulated healthy noisy runs of 3000 steps raised a false straggler; with
    # the lower quartile none did, and a 0.01 s slow rank on 0.01 s steps is still found
    # within 15-20 iterations (tests/unit/test_detect_straggler.py).
    straggler_ratio: float = 1.3
    straggler_quantile: float = 0.25
    straggler_recent: int = 20
    straggler_baseline: int = 500
    straggler_min_baseline: int = 50
    # A slowdown in which no rank stands out (every rank slower alike) is reported only
    # above this larger ratio: on shared machines it is mostly contention from other work,
    # and the policy could not act on it anyway (no node to name).
    straggler_unnamed_ratio: float = 3.0
    # Iterations after each (re)start left out of the straggler windows: warm-up is slow.
    warmup_steps: int = 5
    # Naming the slow rank: its median compute time exceeds the other ranks' median by more
    # than max(culprit_z x robust sigma, culprit_rel x median, culprit_abs_s), and it waits
    # no more than they do.
    culprit_z: float = 4.0
    culprit_rel: float = 0.3
    culprit_abs_s: float = 0.002

    def __post_init__(self) -> None:
        if self.hang_k <= 0 or self.hang_floor_s <= 0:
            raise ValueError("hang_k and hang_floor_s must be positive")
        if self.straggler_ratio <= 1.0:
            raise ValueError(f"straggler_ratio must be > 1, got {self.straggler_ratio}")
        if not 0.0 < self.straggler_quantile <= 0.5:
            raise ValueError(
                f"straggler_quantile must be in (0, 0.5], got {self.straggler_quantile}"
            )
        if min(self.step_window, self.straggler_recent, self.straggler_baseline) < 1:
            raise ValueError("detector windows must hold at least one value")
