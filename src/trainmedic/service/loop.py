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
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import TYPE_CHECKING

from trainmedic.core.engine.engine import Engine, Finding
from trainmedic.core.errors import StoreError, TrainmedicError
from trainmedic.core.observations import (
    CheckpointSaved,
    JobStatus,
    NodeStatus,
    Observation,
    Progress,
    SourceRecovered,
    SourceStale,
)
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import ClusterSnapshot, SchedulerAdapter
from trainmedic.service.config.sections import Config
from trainmedic.service.decisions import Decision, DecisionRecorder
from trainmedic.service.discovery import discover
from trainmedic.service.executor import Executor, ExecutorEvent
from trainmedic.service.holdfile import hold_file_in
from trainmedic.service.node_sources import NodeSources
from trainmedic.service.progress_format import ProgressFormatCheck
from trainmedic.service.source_status import SourceBoard
from trainmedic.sources.checkpoints import CheckpointWatcher
from trainmedic.sources.joblog import JobLogSource
from trainmedic.sources.lines import resolve_timezone
from trainmedic.sources.offsets import FilePosition, OffsetBook
from trainmedic.store import CheckpointSeen, JobRecord, JobSpec, NotFound, Store
from trainmedic.store.leader import Leadership

if TYPE_CHECKING:
    from trainmedic.service.notify import Notifier

log = logging.getLogger(__name__)
Clock = Callable[[], float]


DRAIN_POLLS = 64
"""Polls of an ended job's files before they are closed (each reads a bounded chunk)."""


@dataclass
class CycleResult:
    time: float
    snapshot: ClusterSnapshot
    decisions: list[Decision] = field(default_factory=list)
    executed: list[ExecutorEvent] = field(default_factory=list)


class _JobSources:
    def __init__(
        self,
        job_id: str,
        spec: JobSpec,
        tz: tzinfo,
        board: SourceBoard,
        clock: Clock,
        book: OffsetBook,
    ) -> None:
        self.logs = JobLogSource(
            job_id,
            spec.log_paths,
            tz=tz,
            clock=clock,
            book=book,
            progress_regex=spec.progress_regex,
        )
        self.checkpoints = (
            CheckpointWatcher(job_id, spec.checkpoint_dir, clock=clock)
            if spec.checkpoint_dir
            else None
        )
        now = clock()
        board.declare("scheduler", now, job_id=job_id)
        for path in self.logs.paths:
            board.declare(f"log:{path}", now, job_id=job_id)
        if self.checkpoints is not None:
            board.declare(f"checkpoints:{self.checkpoints.directory}", now, job_id=job_id)

    def close(self) -> None:
        self.logs.close()

    def poll(self) -> list[Observation]:
        out = self.logs.poll()
        if self.checkpoints is not None:
            out.extend(self.checkpoints.poll())
        return out


class Service:
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
        self.engine = Engine(config.detect)
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
        self._jobs: dict[str, _JobSources] = {}
        self._book = OffsetBook(
            [FilePosition(**dataclasses.asdict(o)) for o in store.follower_offsets()],
            lookback_s=config.sources.lookback_s,
            clock=clock,
        )
        self._unstored: list[Finding] = []  # findings the store refused: tried again
        self.sources = SourceBoard()
        # Zone-less printed stamps are read in this zone: for ordering and reports only.
        self._tz = resolve_timezone(config.detect.log_timezone)
        self._kernel_template = config.scheduler.slurm.kernel_log_template
        self._nodes = NodeSources(
            self.sources,
            config.telemetry,
            kernel_logs=kernel_logs,
            kernel_template=self._kernel_template,
            telemetry_urls=telemetry_urls,
            tz=self._tz,
            clock=clock,
            book=self._book,
        )
        self._scheduler_unknown: set[str] = set()  # jobs told the scheduler poll failed
        self._checkpoint_iter: dict[str, int] = {}  # job -> newest saved checkpoint iteration
        # Per job, the (first, latest) progress of the current attempt already stored.
        self._progress_written: dict[str, tuple[Progress | None, Progress | None]] = {}
        self._discovered_at = float("-inf")
        # Told once per job when none of its lines is progress after the start-up grace (a
        # job still importing is not one of unknown format).
        self.progress_format = ProgressFormatCheck(config.detect.startup_grace_s)
        self._lock = threading.Lock()
        # Jobs that ended and were let go: never watched again by this process. Per job, when
        # the scheduler first showed it ended (or gone).
        self._retired: set[str] = set()
        self._ended_since: dict[str, float] = {}
        # Of several services on one store only the leader observes, decides and acts; the
        # others wait (None: this one is alone, as in tests and the demo).
        self._leadership = leadership
        self.leading = leadership is None
        active = {a.job_id for a in store.active_advice()}
        for job in store.list_jobs():
            if _ended(job.state) and job.job_id not in active:
                self._retired.add(job.job_id)  # finished before this process started
            else:
                self._watch(job.job_id, job.spec)

    # -- registration --------------------------------------------------------------------

    def register(self, job_id: str, spec: JobSpec, *, name: str = "") -> None:
        self.store.register_job(job_id, self.adapter.name, now=self.clock(), name=name, spec=spec)
        with self._lock:
            self._watch(job_id, spec)

    def _watch(self, job_id: str, spec: JobSpec) -> None:
        if job_id in self._jobs:
            return
        self._jobs[job_id] = _JobSources(
            job_id, spec, self._tz, self.sources, self.clock, self._book
        )
        for node, path in spec.kernel_logs.items():
            self._nodes.add_kernel_log(node, path)
        attempts = self.store.list_attempts(job_id)
        if attempts:
            latest = max(attempts, key=lambda a: a.attempt)
            self.engine.resume(job_id, latest.attempt, latest.started_at, latest.nodes)
        else:
            self.engine.watch(job_id)

    def _sync_registrations(self, stored: Mapping[str, JobRecord]) -> None:
        """Jobs registered through the API (another process or thread) join the loop."""
        for job in stored.values():
            if job.job_id not in self._retired:
                self._watch(job.job_id, job.spec)

    def _discover(self, now: float) -> None:
        """Register jobs that opted in through their comment or match ``[watch]``."""
        interval = self.config.scheduler.slurm.discovery_interval_s
        if self.config.scheduler.kind != "slurm" or now - self._discovered_at < interval:
            return
        self._discovered_at = now
        everything = self.adapter.poll(())
        if everything.stale:
            return
        args = (self.config.watch, self.config.policy, self._jobs, self._kernel_template)
        candidates = discover(everything.jobs, *args)
        if not candidates:
            return
        # Output paths come from the per-job details, resolved only for the jobs polled by id.
        detailed = self.adapter.poll(tuple(c.job_id for c in candidates))
        for found in discover(detailed.jobs, *args):
            log.info("watching job %s (%s)", found.job_id, found.why)
            self.store.register_job(
                found.job_id, self.adapter.name, now=now, name=found.name, spec=found.spec
            )
            self._watch(found.job_id, found.spec)

    # -- the loop ------------------------------------------------------------------------

    def cycle(self) -> CycleResult:
        with self._lock:
            if not self._lead():
                return CycleResult(self.clock(), ClusterSnapshot(self.clock(), stale=True))
            # One read of the jobs table per cycle (not one per job): only this loop writes a
            # job's state and attempt, so the copy stays true for the cycle.
            stored = {job.job_id: job for job in self.store.list_jobs()}
            self._sync_registrations(stored)
            now = self.clock()
            self._discover(now)
            snapshot = self.adapter.poll(tuple(self._jobs))
            observations = self._scheduler_observations(snapshot, stored)
            for sources in self._jobs.values():
                observations.extend(sources.poll())
            observations.extend(self._nodes.poll(now))
            now = self.clock()
            self.sources.record(observations)
            self.engine.observe_all(observations, now)
            self._remember_progress(observations)
            unknown_format = self.progress_format.check_all(self._jobs, now)
            self.sources.record(unknown_format)
            self.engine.observe_all(unknown_format, now)
            result = CycleResult(now, snapshot)
            result.decisions = self._record(self.engine.evaluate(now), snapshot, now)
            if self.config.service.mode == "action":
                result.executed = self.executor.step(snapshot, self.clock())
            self._retire_ended(snapshot, now)
            if self.notifier is not None:
                self.notifier.cycle(result.decisions, result.executed, now)
            self._save_offsets()
            return result

    def _drain(self, sources: _JobSources, now: float) -> _JobSources:
        """Read what the job's files still hold before letting them go: no line is lost to a
        service that fell behind."""
        for _ in range(DRAIN_POLLS):
            final = sources.poll()
            if not final:
                break
            self.engine.observe_all(final, now)
            self._remember_progress(final)
        return sources

    def _retire_ended(self, snapshot: ClusterSnapshot, now: float) -> None:
        """Unwatch jobs that ended (or vanished from the scheduler) ``unwatch_after_s`` ago and
        have no advice in progress: their files are closed, their state dropped, so a
        long-running service watching jobs that come and go stays flat in memory and fds."""
        if snapshot.stale:
            return  # silence is not an ending
        states = {job.job_id: job.state for job in snapshot.jobs}
        for job_id in list(self._jobs):
            state = states.get(job_id)
            if state is not None and not state.is_terminal():
                self._ended_since.pop(job_id, None)
                continue
            since = self._ended_since.setdefault(job_id, now)
            if now - since < self.config.service.unwatch_after_s:
                continue
            if self.store.active_advice(job_id):
                continue  # a restart may still bring it back
            self._drain(self._jobs.pop(job_id), now).close()
            self.engine.unwatch(job_id)
            self._ended_since.pop(job_id, None)
            self._progress_written.pop(job_id, None)
            self._checkpoint_iter.pop(job_id, None)
            self._retired.add(job_id)
            log.info("job %s ended: unwatched", job_id)

    # -- what must survive a restart -----------------------------------------------------

    def _record(
        self, findings: list[Finding], snapshot: ClusterSnapshot, now: float
    ) -> list[Decision]:
        """Store each finding (those the store refused last cycle first); a finding the
        store refuses now is kept for the next cycle, never dropped."""
        decisions: list[Decision] = []
        retried = len(self._unstored)
        pending, self._unstored = self._unstored + findings, []
        for i, finding in enumerate(pending):
            newest = self._checkpoint_iter.get(finding.job_id)
            try:
                decisions.append(self.decisions.record(finding, snapshot, now, newest))
            except StoreError as exc:
                # Said once per finding; the retries that follow every cycle are quiet.
                level = logging.DEBUG if i < retried else logging.ERROR
                log.log(level, "job %s: decision not stored yet: %s", finding.job_id, exc)
                self._unstored.append(finding)
        return decisions

    def _save_offsets(self) -> None:
        """Store how far each log was read. Not while a finding settles or waits to be
        stored: a restart must read its lines again."""
        if self._unstored or self.engine.settling:
            return
        due = self._book.due()
        try:
            self.store.save_follower_offsets(due)
        except StoreError as exc:
            log.warning("log offsets not stored (next cycle tries again): %s", exc)
            return
        self._book.saved(due)

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
            self._nodes.close()
            for sources in self._jobs.values():
                sources.close()

    def _lead(self) -> bool:
        """Whether this service leads now; on taking the lead, adopt what the old leader had
        claimed (its steps done are recorded, so none is issued twice)."""
        if self._leadership is None:
            return True
        leading = self._leadership.hold()
        if leading and not self.leading:
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

    def _scheduler_observations(
        self, snapshot: ClusterSnapshot, stored_jobs: Mapping[str, JobRecord]
    ) -> list[Observation]:
        out: list[Observation] = []
        if snapshot.stale:
            # Silence is "unknown", never "gone": each job is told once per outage, and its
            # hang detection waits for the scheduler to answer again.
            detail = snapshot.error or "scheduler poll failed"
            for job_id in self._jobs:
                if job_id not in self._scheduler_unknown:
                    self._scheduler_unknown.add(job_id)
                    out.append(SourceStale(snapshot.time, "scheduler", detail, job_id=job_id))
            return out
        for job_id in sorted(self._scheduler_unknown):
            out.append(SourceRecovered(snapshot.time, "scheduler", job_id=job_id))
        self._scheduler_unknown.clear()
        for job in snapshot.jobs:
            if job.job_id not in self._jobs:
                continue
            self._nodes.jobs_run_on(job.nodes, snapshot.time)
            if job.state is JobState.RUNNING and job.nodes:
                self.sources.set_nodes(job.job_id, job.nodes)
            if job.state is JobState.RUNNING:
                self.progress_format.running(job.job_id, snapshot.time)
            out.append(
                JobStatus(
                    snapshot.time,
                    job.job_id,
                    job.state,
                    job.nodes,
                    job.attempt,
                    job.exit_code,
                    job.reason,
                )
            )
            stored = stored_jobs.get(job.job_id)
            # A requeued job still lists its old nodes while completing: an attempt's nodes
            # are recorded once it runs.
            if stored is None or stored.state != job.state.value or stored.attempt != job.attempt:
                self._end_attempt(stored, job.state, job.attempt, snapshot.time)
                self.store.update_job_progress(
                    job.job_id, state=job.state.value, attempt=job.attempt
                )
                if job.nodes and job.state is JobState.RUNNING:
                    self.store.record_attempt_start(
                        job.job_id, job.attempt, started_at=snapshot.time, nodes=job.nodes
                    )
        for node in snapshot.nodes:
            out.append(NodeStatus(snapshot.time, node.name, node.state, node.reason))
        return out

    def _end_attempt(
        self, stored: JobRecord | None, state: JobState, attempt: int, now: float
    ) -> None:
        """The stored attempt stopped running (another state or a newer attempt): record
        when, for the downtime accounting (the first end recorded wins)."""
        if stored is None or stored.state != JobState.RUNNING.value:
            return
        if state is JobState.RUNNING and attempt == stored.attempt:
            return
        end_state = state.value if attempt == stored.attempt else JobState.REQUEUED.value
        # NotFound: the attempt was never seen running with its nodes, nothing to close.
        with contextlib.suppress(NotFound):
            self.store.record_attempt_end(
                stored.job_id, stored.attempt, ended_at=now, end_state=end_state
            )

    def _remember_progress(self, observations: list[Observation]) -> None:
        seen: dict[str, list[CheckpointSeen]] = {}
        for obs in observations:
            if isinstance(obs, CheckpointSaved) and obs.job_id in self._jobs:
                seen.setdefault(obs.job_id, []).append(
                    CheckpointSeen(obs.iteration, obs.time, begun=obs.in_progress)
                )
            if (
                isinstance(obs, CheckpointSaved)
                and not obs.in_progress
                and obs.iteration > self._checkpoint_iter.get(obs.job_id, -1)
            ):
                self._checkpoint_iter[obs.job_id] = obs.iteration
                if obs.job_id in self._jobs:
                    self.store.update_job_progress(
                        obs.job_id, checkpoint_iteration=obs.iteration, checkpoint_at=obs.time
                    )
        for job_id, checkpoints in seen.items():
            self.store.record_checkpoints(job_id, checkpoints)
        for job_id in self._jobs:
            first, last = self.engine.progress_of(job_id)
            written_first, written_last = self._progress_written.get(job_id, (None, None))
            if last is None or last is written_last:
                continue
            if first is not None and first is not written_first:
                # A new attempt's first progress: its start of productive work is exact.
                self.store.update_job_progress(
                    job_id, progress_at=first.time, iteration=first.iteration
                )
            self.store.update_job_progress(job_id, progress_at=last.time, iteration=last.iteration)
            self._progress_written[job_id] = (first, last)


def _ended(state: str) -> bool:
    try:
        return JobState(state).is_terminal()
    except ValueError:
        return False  # "" before the first poll, or a state this version does not know
