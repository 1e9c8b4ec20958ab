"""Detector thresholds.

The defaults are for real training jobs, whose progress reports come minutes apart and whose
start-up takes minutes: Megatron-LM prints one line per ``--log-interval`` (default 100)
iterations, the Hugging Face Trainer one per ``logging_steps`` (default 500), Lightning logs
every ``log_every_n_steps`` (default 50). The hang threshold therefore follows each job's own
observed cadence rather than a fixed time. ``SMALL_JOB`` holds the values the CPU demo and the
tests use (4 gloo ranks printing every few milliseconds, starting in seconds).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DetectorConfig:
    # Hang: no progress report for longer than
    #   max(hang_floor_s, hang_k x q(report intervals) + hang_margin_s)
    # where q is the `hang_quantile` (1.0: the longest) of the last `report_window` intervals
    # between two reports (wall time between the lines, as read: this includes the job's
    # own jitter, its unannounced evaluations and checkpoint writes, and output buffering).
    # hang_k = 5 on the longest interval is what NVIDIA's resiliency extension
    # (nvidia-resiliency-ext fault tolerance, safety_factor=5.0) does with observed heartbeat
    # intervals. The longest, not a quantile: a long gap that comes once in a hundred reports
    # (an evaluation, a flush of buffered output) comes again. The window is long (1000
    # reports: a day of a job logging every 100 s) so it is not forgotten in between. The
    # margin absorbs delivery delay (NFS attribute caching holds up to 60 s, a slow cycle of
    # the service); the floor keeps a job that prints every step from being called hung
    # within minutes (torch's own NCCL watchdog waits 10).
    hang_k: float = 5.0
    hang_quantile: float = 1.0
    hang_margin_s: float = 60.0
    hang_floor_s: float = 300.0
    report_window: int = 1000
    # Until this many intervals are known the cadence is unknown, and the job is given the
    # start-up grace after each report too (the second report of a job logging every 100
    # iterations comes as late as the first).
    min_report_intervals: int = 2
    # A job that has not printed its first report is not hung before the start-up grace ends
    # (imports, rendezvous, NCCL set-up, checkpoint load, then `log_interval` iterations).
    # Before any start-up of the job was observed: `startup_grace_s` (30 min; NVRx waits 60
    # for a first heartbeat). Once observed (remembered across the job's attempts):
    # max(hang_floor_s, startup_k x the longest observed + hang_margin_s); a restart loads a
    # checkpoint that the first attempt did not, hence the factor.
    startup_grace_s: float = 1800.0
    startup_k: float = 3.0
    # A checkpoint in progress extends the hang window until it is saved or this cap passes.
    checkpoint_cap_s: float = 1800.0
    # How zone-less printed times (Python logging's asctime, syslog) are read by the service:
    # "local" (the service machine's zone, TZ included), "UTC", or an IANA name such as
    # "Europe/Paris". Printed times only order events and date reports: liveness uses the
    # time a line was read.
    log_timezone: str = "local"
    # Recent step times kept for their p99 (shown in a hang's basis; the straggler rule has
    # its own windows).
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
        for name in ("hang_k", "hang_floor_s", "startup_grace_s", "startup_k", "checkpoint_cap_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"detect.{name} must be positive, got {getattr(self, name)}")
        if self.hang_margin_s < 0:
            raise ValueError(f"detect.hang_margin_s must be >= 0, got {self.hang_margin_s}")
        if not 0.0 < self.hang_quantile <= 1.0:
            raise ValueError(f"detect.hang_quantile must be in (0, 1], got {self.hang_quantile}")
        if self.min_report_intervals < 1 or self.report_window < self.min_report_intervals:
            raise ValueError("detect.report_window must be >= min_report_intervals >= 1")
        if self.straggler_ratio <= 1.0:
            raise ValueError(f"straggler_ratio must be > 1, got {self.straggler_ratio}")
        if not 0.0 < self.straggler_quantile <= 0.5:
            raise ValueError(
                f"straggler_quantile must be in (0, 0.5], got {self.straggler_quantile}"
            )
        if min(self.step_window, self.straggler_recent, self.straggler_baseline) < 1:
            raise ValueError("detector windows must hold at least one value")


SMALL_JOB = DetectorConfig(
    hang_k=6.0,
    hang_quantile=0.99,
    hang_margin_s=0.0,
    report_window=200,
    hang_floor_s=5.0,
    startup_grace_s=60.0,
    startup_k=5.0,
    checkpoint_cap_s=600.0,
)
"""For the CPU demo and the tests: a job printing every step (milliseconds apart) and starting
in seconds, so a hang is called after 5 s of silence (the values trainmedic used before the
threshold followed the reporting cadence)."""
