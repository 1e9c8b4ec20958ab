"""A job's reporting cadence and start-up time, learned from what it printed (pure).

The hang threshold follows the *intervals between progress reports*, not the step time: a job
logging every 100 iterations reports every 100 steps, and its silence in between is normal.
An interval is measured on the service's clock, from when one report was read to when the
next one was (what liveness is judged on later), so output buffering and delivery delay are
part of it. Reports read together (a burst of buffered lines, or a log read again from its
start after a restart of the service) have no such interval: their printed times tell how
far apart they were written, and only differences of printed times are used, so a zone or a
clock offset cancels out.

Both are remembered across the job's attempts: the cadence is the job's configuration, and the
start-up of one attempt tells how long the next may take.

The cadence in *steps* is kept beside it: how many iterations one report moves on (Megatron's
``--log-interval``, HF's ``logging_steps``, a tqdm bar's throttled redraws). The last report
before a crash lags the crash by up to that many steps, differently in each attempt, so it is
what the policy allows between two attempts' failure points (``core.policy.iteration_match``).
"""

from __future__ import annotations

from collections import deque

from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.detect.stats import quantile

STARTUPS_KEPT = 20


class ReportCadence:
    def __init__(self, config: DetectorConfig) -> None:
        self.config = config
        self._intervals: deque[float] = deque(maxlen=config.report_window)
        self._interval: float | None = None  # cached quantile; None: to compute
        self._startups: deque[float] = deque(maxlen=STARTUPS_KEPT)
        self._previous: tuple[float, float] | None = None  # (printed, read) of the last report
        self._announced_checkpoint = False
        self._step_gaps: deque[int] = deque(maxlen=config.report_window)
        self._last_iteration: int | None = None  # of the attempt's latest report

    def new_attempt(self) -> None:
        """The gap between two attempts is no interval between reports."""
        self._previous = None
        self._last_iteration = None
        self._announced_checkpoint = False

    def checkpoint_announced(self) -> None:
        """A ``checkpoint begin`` line: the hang window has its own extension for the write,
        so the interval that contains it says nothing about the cadence. (A save that is
        only seen once done stays in: the next one will be just as silent.)"""
        self._announced_checkpoint = True

    def report(self, printed: float, read: float, iteration: int | None = None) -> None:
        """A report of a new iteration, printed at ``printed`` and read at ``read``."""
        if iteration is not None:
            last, self._last_iteration = self._last_iteration, iteration
            if last is not None and iteration > last:
                self._step_gaps.append(iteration - last)
        previous, self._previous = self._previous, (printed, read)
        skip, self._announced_checkpoint = self._announced_checkpoint, False
        if previous is None or skip:
            return
        gap = read - previous[1]
        if gap <= 0.0:
            gap = printed - previous[0]  # read together: how far apart they were written
        if gap > 0.0:
            self._intervals.append(gap)
            self._interval = None

    def startup(self, seconds: float) -> None:
        """An observed start-up: attempt start to its first report, both as read."""
        if seconds >= 0.0:
            self._startups.append(seconds)

    @property
    def intervals(self) -> int:
        return len(self._intervals)

    @property
    def interval_s(self) -> float | None:
        """The ``hang_quantile`` of the recent intervals; None until enough are known."""
        if len(self._intervals) < self.config.min_report_intervals:
            return None
        if self._interval is None:
            self._interval = quantile(list(self._intervals), self.config.hang_quantile)
        return self._interval

    @property
    def interval_steps(self) -> int | None:
        """The most iterations one report moved on among the recent ones (the longest, as for
        the hang threshold: the gap a crash falls in may be any of them); None until
        ``min_report_intervals`` are known."""
        if len(self._step_gaps) < self.config.min_report_intervals:
            return None
        return max(self._step_gaps)

    @property
    def startup_grace_s(self) -> float:
        """The default grace before any start-up was observed, else one learned from them."""
        cfg = self.config
        if not self._startups:
            return cfg.startup_grace_s
        return max(cfg.hang_floor_s, cfg.startup_k * max(self._startups) + cfg.hang_margin_s)

    @property
    def startups(self) -> tuple[float, ...]:
        return tuple(self._startups)
