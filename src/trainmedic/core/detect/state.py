"""Per-job detector state: the engine feeds it observations and asks it for anomalies.

Usage (the engine owns the clock; this class never reads one)::

    state = JobDetectorState("job-1", DetectorConfig())
    state.observe(obs)                 # JobStatus, Progress, CheckpointSaved, SourceStale,
                                       # SourceRecovered; others ignored
    state.observe_event(event, now)    # signature matches from this job's logs / its nodes
    for anomaly in state.check(now):   # new anomalies only, each reported once
        ...

Each anomaly is reported once per episode: a hang again only after progress resumed, a
straggler again only after the step time recovered, a crash once per attempt. A new attempt
(``JobStatus.attempt`` grows) resets what belongs to the attempt (last progress, windows of
recent steps, open episodes) and keeps the job's step-time baseline, its reporting cadence and
its observed start-ups. Memory is bounded by the window sizes in :class:`DetectorConfig`.

A job's liveness sources are its logs (``log:<path>``) and the scheduler (``scheduler``): while
one of them cannot be read (a ``SourceStale`` for the job), the job is never called hung, since
its silence is unknown; when it comes back, silence is counted from then.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from trainmedic.core.detect.anomaly import Anomaly
from trainmedic.core.detect.cadence import ReportCadence
from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.detect.crash import crash_from_event, crash_from_status
from trainmedic.core.detect.hang import HangInputs, check_hang, hang_from_event
from trainmedic.core.detect.nan import nan_from_event, nan_from_progress
from trainmedic.core.detect.stats import quantile
from trainmedic.core.detect.straggler import RankTiming, check_straggler
from trainmedic.core.model import Event
from trainmedic.core.observations import (
    CheckpointSaved,
    JobStatus,
    Observation,
    Progress,
    ProgressRun,
    SourceRecovered,
    SourceStale,
)
from trainmedic.core.states import JobState


class _RankWindow:
    __slots__ = ("compute", "node", "wait")

    def __init__(self, size: int) -> None:
        self.node: str | None = None
        self.compute: deque[float] = deque(maxlen=size)
        self.wait: deque[float] = deque(maxlen=size)


class JobDetectorState:
    def __init__(self, job_id: str, config: DetectorConfig | None = None) -> None:
        self.job_id = job_id
        self.config = config or DetectorConfig()
        self.state: JobState | None = None  # None until the scheduler reports the job
        self.attempt = 0
        self.nodes: tuple[str, ...] = ()
        self._steps: deque[float] = deque(maxlen=self.config.step_window)
        self._p99: float | None = None
        self._baseline: deque[float] = deque(maxlen=self.config.straggler_baseline)
        self._pending: list[Anomaly] = []
        self.cadence = ReportCadence(self.config)
        self.unknown_sources: dict[str, str] = {}  # liveness source -> why it cannot be read
        self.watch_from: float | None = None  # a liveness source came back at this time
        self._previous_iteration: int | None = None  # the highest of the attempt before
        self._reset_attempt()

    def _reset_attempt(self) -> None:
        cfg = self.config
        self.running_since: float | None = None
        self._start_seen = False  # the attempt's start was observed (not first seen running)
        self.last_progress: float | None = None  # printed time of the latest report
        self.last_seen: float | None = None  # when the latest report was read
        self.iteration: int | None = None
        self._iteration_time: float | None = None
        self._iterations_seen = 0
        self._skip_step = False
        self.checkpoint_started: float | None = None
        self.last_checkpoint_saved: float | None = None
        self._recent: deque[tuple[float, float]] = deque(maxlen=cfg.straggler_recent)
        self._ranks: dict[int, _RankWindow] = {}
        self._crashed = False
        self._hang_open = False
        self._straggler_open = False

    # -- feeding -------------------------------------------------------------------------

    def observe(self, obs: Observation) -> None:
        if isinstance(obs, JobStatus) and obs.job_id == self.job_id:
            self._observe_status(obs)
        elif isinstance(obs, Progress) and obs.job_id == self.job_id:
            self._observe_progress(obs)
        elif isinstance(obs, CheckpointSaved) and obs.job_id == self.job_id:
            # The next step's time includes the save: keep it out of the step statistics
            # (the hang window has its own checkpoint extension).
            self._skip_step = True
            read = obs.time if obs.received is None else obs.received
            if obs.in_progress:
                self.checkpoint_started = read
                self.cadence.checkpoint_announced()
            else:
                self.checkpoint_started = None
                prev = self.last_checkpoint_saved
                self.last_checkpoint_saved = read if prev is None else max(prev, read)
        elif isinstance(obs, SourceStale | SourceRecovered) and obs.job_id == self.job_id:
            self._observe_source(obs)

    def _observe_source(self, obs: SourceStale | SourceRecovered) -> None:
        # "progress": the service found none of the job's lines to be progress (an unknown
        # format): its silence cannot be judged, so it is never called hung (crashes still are).
        if not (obs.source in ("scheduler", "progress") or obs.source.startswith("log:")):
            return  # checkpoints, telemetry: not what tells whether the job is alive
        if isinstance(obs, SourceStale):
            self.unknown_sources[obs.source] = obs.detail
        elif self.unknown_sources.pop(obs.source, None) is not None:
            previous = self.watch_from
            self.watch_from = obs.time if previous is None else max(previous, obs.time)

    def observe_event(self, event: Event, now: float) -> None:
        """A matched line from this job's logs or from the kernel log/telemetry of its nodes."""
        if not self._running or self._crashed:
            return
        anomaly = nan_from_event(self.job_id, event, now, self.iteration)
        if anomaly is None:
            anomaly = crash_from_event(self.job_id, event, now, self.iteration)
        if anomaly is not None:
            self._crashed = True
            self._pending.append(anomaly)
            return
        if not self._hang_open:
            anomaly = hang_from_event(self.job_id, event, now, self.last_progress, self.iteration)
            if anomaly is not None:
                self._hang_open = True
                self._pending.append(anomaly)

    def _observe_status(self, status: JobStatus) -> None:
        previous = self.state
        new_attempt = status.attempt != self.attempt
        if new_attempt:
            self.attempt = status.attempt
            self._previous_iteration = self.iteration
            self._reset_attempt()
            self.cadence.new_attempt()
        self.state = status.state
        self.nodes = status.nodes or self.nodes
        if status.state is JobState.RUNNING:
            if self.running_since is None:
                self.running_since = status.time
                # A job first seen already running has run for an unknown time: its
                # start-up is learned only from a start the service saw happen.
                self._start_seen = previous is not None and (
                    new_attempt or previous is not JobState.RUNNING
                )
        else:
            self.running_since = None
        if not self._crashed:
            anomaly = crash_from_status(status, status.time, self.iteration)
            if anomaly is not None:
                self._crashed = True
                self._pending.append(anomaly)

    def _observe_progress(self, p: Progress) -> None:
        read = p.time if p.received is None else p.received
        self._report(
            p.time, read, p.iteration, p.rank, p.node, p.step_time, p.compute_time, p.wait_time
        )
        if not self._crashed:
            anomaly = nan_from_progress(p, p.time)
            if anomaly is not None:
                self._crashed = True
                self._pending.append(anomaly)

    def observe_run(self, run: ProgressRun, lines: Iterable[int] | None = None) -> None:
        """Each line of ``run`` (``lines``: these of them), as ``observe`` takes its
        ``Progress``: a plain line's loss is finite, so only the step bookkeeping is done."""
        if run.job_id != self.job_id:
            return
        times, iterations, steps = run.times, run.iterations, run.step_times
        compute, wait = run.compute_times, run.wait_times
        read, rank, node, report = run.received, run.rank, run.node, self._report
        if (
            lines is None
            and self.last_seen is not None
            and self.running_since is not None
            and self.iteration is not None
            and max(iterations) <= self.iteration
        ):
            # Another rank's reports of iterations already counted (most lines of a job with
            # a log per rank): only liveness and the rank's timings move, as in _report.
            top, last = max(times), self.last_progress
            self.last_progress = top if last is None or top > last else last
            self.last_seen = max(self.last_seen, read)
            self._hang_open = False
            if compute is not None and wait is not None:
                window = self._ranks.get(rank)
                if window is None:
                    window = self._ranks[rank] = _RankWindow(self.config.straggler_recent)
                window.node = node or window.node
                window.compute.extend(compute)
                window.wait.extend(wait)
            return
        for i in range(len(times)) if lines is None else lines:
            report(
                times[i],
                read,
                iterations[i],
                rank,
                node,
                steps[i],
                None if compute is None else compute[i],
                None if wait is None else wait[i],
            )

    def _report(
        self,
        printed: float,
        read: float,
        iteration: int,
        rank: int | None,
        node: str | None,
        step_time: float | None,
        compute_time: float | None,
        wait_time: float | None,
    ) -> None:
        """A progress report's effect on the step and liveness bookkeeping (its loss is
        checked by the caller: nothing here reads what that check sets)."""
        if self.running_since is None and self.state is None:
            self.running_since = read  # no scheduler view: progress shows it runs
        if self.last_seen is None and self._start_seen and self.running_since is not None:
            # A new attempt resumes at or before where the last one stopped: a first report
            # beyond it is a late line of the old attempt, not this one's start-up.
            previous = self._previous_iteration
            if previous is None or iteration <= previous:
                self.cadence.startup(read - self.running_since)
        last = self.last_progress
        self.last_progress = printed if last is None or printed > last else last
        self.last_seen = read if self.last_seen is None else max(self.last_seen, read)
        self._hang_open = False
        if rank is not None and compute_time is not None and wait_time is not None:
            window = self._ranks.get(rank)
            if window is None:
                window = self._ranks[rank] = _RankWindow(self.config.straggler_recent)
            window.node = node or window.node
            window.compute.append(compute_time)
            window.wait.append(wait_time)
        if self.iteration is not None and iteration <= self.iteration:
            return  # another rank reporting an iteration already counted
        if self._running:  # a line read after the attempt ended is no report interval
            self.cadence.report(printed, read, iteration)
        step = step_time
        if step is None and self.iteration is not None and self._iteration_time is not None:
            step = (printed - self._iteration_time) / (iteration - self.iteration)
        self.iteration = iteration
        self._iteration_time = printed
        self._iterations_seen += 1
        skip, self._skip_step = self._skip_step, False
        if step is None or step < 0 or skip or self._iterations_seen <= self.config.warmup_steps:
            return
        self._steps.append(step)
        self._p99 = None
        if len(self._recent) == self._recent.maxlen and not self._straggler_open:
            self._baseline.append(self._recent[0][1])  # keep the baseline free of slow steps
        self._recent.append((printed, step))

    @property
    def _running(self) -> bool:
        return self.running_since is not None

    # -- checking ------------------------------------------------------------------------

    @property
    def p99_step_s(self) -> float | None:
        if self._p99 is None and self._steps:
            self._p99 = quantile(list(self._steps), 0.99)
        return self._p99

    def check(self, now: float) -> tuple[Anomaly, ...]:
        """New anomalies since the last call (pending event/state ones, hang, straggler)."""
        found, self._pending = self._pending, []
        if self._crashed or not self._running:
            return tuple(found)
        if not self._hang_open:
            hang = check_hang(self._hang_inputs(now), self.config)
            if hang is not None:
                self._hang_open = True
                found.append(hang)
        straggler = self._check_straggler(now)
        if straggler is not None:
            found.append(straggler)
        return tuple(found)

    def _hang_inputs(self, now: float) -> HangInputs:
        return HangInputs(
            job_id=self.job_id,
            now=now,
            running_since=self.running_since,
            last_progress=self.last_progress,
            report_interval_s=self.cadence.interval_s,
            startup_grace_s=self.cadence.startup_grace_s,
            last_seen=self.last_seen,
            checkpoint_started=self.checkpoint_started,
            last_checkpoint_saved=self.last_checkpoint_saved,
            iteration=self.iteration,
            nodes=self.nodes,
            p99_step_s=self.p99_step_s,
            unknown_sources=tuple(sorted(self.unknown_sources)),
            watch_from=self.watch_from,
        )

    def _check_straggler(self, now: float) -> Anomaly | None:
        if not self._recent:
            return None
        anomaly = check_straggler(
            job_id=self.job_id,
            now=now,
            since=self._recent[0][0],
            recent=[step for _, step in self._recent],
            baseline=list(self._baseline),
            timings=[
                RankTiming(rank, w.node, tuple(w.compute), tuple(w.wait))
                for rank, w in sorted(self._ranks.items())
            ],
            config=self.config,
            iteration=self.iteration,
        )
        if anomaly is None:
            self._straggler_open = False  # recovered: a new slowdown is a new episode
            return None
        if self._straggler_open:
            return None
        self._straggler_open = True
        return anomaly
