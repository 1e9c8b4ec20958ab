"""The recovery service's control loop (the imperative shell around the pure engine).

One ``cycle()``: poll the scheduler once for every watched job and every node, read every
source (job logs, progress files, checkpoints, node kernel logs, GPU telemetry scraped in a
thread of its own), feed the engine, turn its findings into stored incidents and advice (the
policy decides), and let the executor carry advice out in action mode. ``run()`` repeats it
every ``poll_interval_s``.

A source that cannot be read (a log, the scheduler, a node's kernel log or DCGM exporter) is
"unknown" for the job, shown in ``sources`` (the API's per-job source status), and never a
failure by itself.

State lives in the store, not here: a restarted service re-registers the stored jobs and
goes on reading their logs where the last run left them (``sources.offsets``: the stored
offsets lag a few cycles, so lines whose finding had not been stored yet are read again and
the store de-duplicates what they re-derive); nothing is acted on twice, nothing is lost, and
old lines are not news. A finding leaves the loop only once stored: one that the store
refused ("database is locked", a full disk) is tried again next cycle.

``Service`` is this loop; its parts live beside it: ``watched_jobs`` (jobs joining and
being let go), ``scheduler_observations`` (the scheduler's answer), ``durable_state`` (what
is stored each cycle).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainmedic.core.engine.engine import Engine, Finding
from trainmedic.core.errors import TrainmedicError
from trainmedic.core.observations import Observation, Progress
from trainmedic.schedulers.base import ClusterSnapshot, SchedulerAdapter
from trainmedic.service.config.sections import Config
from trainmedic.service.decisions import Decision, DecisionRecorder
from trainmedic.service.durable_state import DurableState
from trainmedic.service.executor import Executor, ExecutorEvent
from trainmedic.service.holdfile import hold_file_in
from trainmedic.service.node_sources import NodeSources
from trainmedic.service.progress_format import ProgressFormatCheck
from trainmedic.service.scheduler_observations import SchedulerObservations
from trainmedic.service.source_pool import Polling, SourcePool
from trainmedic.service.source_status import SourceBoard
from trainmedic.service.watched_jobs import JobSources, WatchedJobs, stored_state_ended
from trainmedic.sources.lines import resolve_timezone
from trainmedic.sources.offsets import FilePosition, OffsetBook
from trainmedic.store import Store
from trainmedic.store.leader import Leadership

if TYPE_CHECKING:
    from trainmedic.service.notify import Notifier

log = logging.getLogger(__name__)
Clock = Callable[[], float]


@dataclass
class CycleResult:
    time: float
    snapshot: ClusterSnapshot
    decisions: list[Decision] = field(default_factory=list)
    executed: list[ExecutorEvent] = field(default_factory=list)


class Service(WatchedJobs, DurableState, SchedulerObservations):
    def __init__(
        self,
        config: Config,
        store: Store,
        adapter: SchedulerAdapter,
        *,
        executor_id: str = "trainmedic",
        kernel_logs: Mapping[str, str] | None = None,
        telemetry_urls: Mapping[str, str] | None = None,
        clock: Clock = time.time,
        leadership: Leadership | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.config = config
        self.notifier = notifier  # webhooks (service.notify); sends in its own thread
        self.store = store
        self.adapter = adapter
        self.clock = clock
        self.decisions = DecisionRecorder(config, store)
        self.executor = Executor(
            store,
            adapter,
            executor_id=executor_id,
            stop_enforcement=config.policy.stop_enforcement,
            hold_file=hold_file_in(config.service.state_dir),
            # a job's own stop_enforcement (comment, POST /jobs) is enforced as advised
            stop_enforced_for=lambda job_id: self.decisions.policy_for(job_id).stop_enforcement,
        )
        self._unstored: list[Finding] = []  # findings the store refused: tried again
        self.sources = SourceBoard()
        # Zone-less printed stamps are read in this zone: for ordering and reports only.
        self._tz = resolve_timezone(config.detect.log_timezone)
        self._kernel_template = config.scheduler.slurm.kernel_log_template
        self._kernel_logs = dict(kernel_logs or {})
        self._telemetry_urls = dict(telemetry_urls or {})
        self._scheduler_unknown: set[str] = set()  # jobs told the scheduler poll failed
        self._discovered_at = float("-inf")
        # Told once per job when none of its lines is progress after the start-up grace (a
        # job still importing is not one of unknown format).
        self.progress_format = ProgressFormatCheck(config.detect.startup_grace_s)
        self._lock = threading.Lock()
        # Of several services on one store only the leader observes, decides and acts; the
        # others wait (None: this one is alone, as in tests and the demo).
        self._leadership = leadership
        self.leading = leadership is None
        # Job files read by reader processes (``[service] source_workers``), or here.
        workers = config.service.source_workers
        self._pool = SourcePool(workers, self._tz) if workers else None
        self._load_state()

    def _load_state(self) -> None:
        """The jobs to watch, where their logs were left and their latest attempts, as the
        store has them: at start, and again on taking the lead (a standby's own copy dates
        from its start, while the old leader went on reading and recording)."""
        self.engine = Engine(self.config.detect)
        self._jobs: dict[str, JobSources] = {}
        self._book = OffsetBook(
            [FilePosition(**dataclasses.asdict(o)) for o in self.store.follower_offsets()],
            lookback_s=self.config.sources.lookback_s,
            clock=self.clock,
        )
        if self._pool is not None:
            self._pool.reset(self._book.saved_positions(), self._book.window_start)
        self._nodes = NodeSources(
            self.sources,
            self.config.telemetry,
            kernel_logs=self._kernel_logs,
            kernel_template=self._kernel_template,
            telemetry_urls=self._telemetry_urls,
            tz=self._tz,
            clock=self.clock,
            book=self._book,
        )
        self._ended_due: dict[str, tuple[str, int]] = {}  # see _save_ended_states
        self._checkpoint_iter: dict[str, int] = {}  # job -> newest saved checkpoint iteration
        # Per job, the (first, latest) progress of the current attempt already stored.
        self._progress_written: dict[str, tuple[Progress | None, Progress | None]] = {}
        # Jobs that ended and were let go: never watched again by this process. Per job, when
        # the scheduler first showed it ended (or gone).
        self._retired: set[str] = set()
        self._ended_since: dict[str, float] = {}
        active = {a.job_id for a in self.store.active_advice()}
        for job in self.store.list_jobs():
            if stored_state_ended(job.state) and job.job_id not in active:
                self._retired.add(job.job_id)  # finished before this process started
            else:
                self._watch(job.job_id, job.spec)

    # -- the loop ------------------------------------------------------------------------

    def cycle(self) -> CycleResult:
        with self._lock:
            if not self._lead():
                return CycleResult(self.clock(), ClusterSnapshot(self.clock(), stale=True))
            # Reader processes (``source_workers``) read the jobs' files meanwhile: a job that
            # joins below is read from the next cycle on.
            polling = self._pool.start_poll() if self._pool is not None else None
            # One read of the jobs table per cycle (not one per job): only this loop writes a
            # job's state and attempt, so the copy stays true for the cycle. Jobs stored as
            # ended and let go are not read again (the table keeps every job ever watched).
            stored = {job.job_id: job for job in self.store.list_live_jobs(self._jobs)}
            self._sync_registrations(stored)
            now = self.clock()
            self._discover(now)
            snapshot = self.adapter.poll(tuple(self._jobs))
            observations = self._scheduler_observations(snapshot, stored)
            if polling is None:
                for sources in self._jobs.values():
                    observations.extend(sources.poll())
                observations.extend(self._nodes.poll(now))
                now = self.clock()
                self.sources.record(observations)
                self.engine.observe_all(observations, now)
            else:
                now = self._observe_read_apart(observations, polling, now)
                self.sources.record(observations)
            self._remember_progress(observations)
            unknown_format = self.progress_format.check_all(self._jobs, now)
            self.sources.record(unknown_format)
            self.engine.observe_all(unknown_format, now)
            result = CycleResult(now, snapshot)
            self.engine.kernel_log_nodes = self._nodes.kernel_log_nodes()
            result.decisions = self._record(self.engine.evaluate(now), snapshot, now)
            if self.config.service.mode == "action":
                result.executed = self.executor.step(snapshot, self.clock())
            self._retire_ended(snapshot, now)
            if self.notifier is not None:
                self.notifier.cycle(result.decisions, result.executed, now)
            self._save_ended_states(now)
            self._save_offsets()
            return result

    def _observe_read_apart(
        self, observations: list[Observation], polling: Polling, now: float
    ) -> float:
        """The jobs' lines from the reader processes, each answer observed as it comes while
        they read on; the scheduler's observations first and the nodes' last, as in one
        cycle read here. ``observations`` gets them all; returns the time after the last."""
        head = len(observations)
        node_observations = self._nodes.poll(now)  # while the readers read
        now = self.clock()
        self.engine.observe_all(observations[:head], now)
        for read in polling.answers():
            now = self.clock()
            self.engine.observe_all(read, now)
            observations.extend(read)
        observations.extend(node_observations)
        now = self.clock()
        self.engine.observe_all(node_observations, now)
        return now

    def reader_processes(self) -> tuple[list[int], float]:
        """The reader processes' ids and the CPU seconds they used (``source_workers``; none
        and 0.0 when job files are read in this process)."""
        if self._pool is None:
            return [], 0.0
        return self._pool.pids(), self._pool.cpu_s()

    def run(self, stop: threading.Event) -> None:
        interval = self.config.service.poll_interval_s
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    self.cycle()
                except (TrainmedicError, OSError) as exc:
                    # The loop outlives a bad cycle (store busy, a source vanished): the next
                    # cycle starts from the store and the scheduler again.
                    log.error("service cycle failed: %s", exc)
                stop.wait(max(0.0, interval - (time.monotonic() - started)))
        finally:
            self.close()

    def close(self) -> None:
        """Stop the telemetry thread and close the followed files (``run`` does it on exit)."""
        with self._lock:
            self._close_sources()
            if self._pool is not None:
                self._pool.stop()

    def _close_sources(self) -> None:
        self._nodes.close()
        for sources in self._jobs.values():
            sources.close()

    def _lead(self) -> bool:
        """Whether this service leads now; on taking the lead, reload the jobs' state from the
        store and adopt what the old leader had claimed (its steps done are recorded, so none
        is issued twice)."""
        if self._leadership is None:
            return True
        leading = self._leadership.hold()
        if leading and not self.leading:
            # Start where the store says the old leader left off, as a restart would: this
            # process's offsets and attempts date from its own start.
            self._close_sources()
            self._load_state()
            adopted = self.store.adopt_applying_advice(self.executor.executor_id)
            log.warning(
                "leading now (%s); adopted %d advice in progress",
                self.executor.executor_id,
                adopted,
            )
        elif self.leading and not leading:
            log.warning("lost the lead: standing by")
        self.leading = leading
        return leading
