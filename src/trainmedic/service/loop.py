"""The recovery service's control loop (the imperative shell around the pure engine).

One ``cycle()``: poll the scheduler once for every watched job and every node, read every
source (job logs, progress files, checkpoints, node kernel logs, GPU telemetry), feed the
engine, turn its findings into stored incidents and advice (the policy decides), and let the
executor carry advice out in action mode. ``run()`` repeats it every ``poll_interval_s``.

State lives in the store, not here: a restarted service re-registers the stored jobs, reads
their logs again from the start (attempt banners keep old attempts' lines out of the current
evidence) and reaches the same incidents, which the store de-duplicates, so nothing is acted
on twice and nothing is lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from trainmedic.core.engine.engine import Engine
from trainmedic.core.errors import TrainmedicError
from trainmedic.core.observations import (
    CheckpointSaved,
    JobStatus,
    NodeStatus,
    Observation,
    Progress,
)
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import ClusterSnapshot, SchedulerAdapter
from trainmedic.service.config.sections import Config
from trainmedic.service.decisions import Decision, DecisionRecorder
from trainmedic.service.discovery import discover
from trainmedic.service.executor import Executor, ExecutorEvent
from trainmedic.sources.checkpoints import CheckpointWatcher
from trainmedic.sources.dcgm import DcgmScraper
from trainmedic.sources.joblog import JobLogSource
from trainmedic.sources.kernel import KernelLogSource
from trainmedic.store import JobSpec, Store

log = logging.getLogger(__name__)
Clock = Callable[[], float]


@dataclass
class CycleResult:
    time: float
    snapshot: ClusterSnapshot
    decisions: list[Decision] = field(default_factory=list)
    executed: list[ExecutorEvent] = field(default_factory=list)


class _JobSources:
    def __init__(self, job_id: str, spec: JobSpec) -> None:
        self.logs = JobLogSource(job_id, spec.log_paths)
        self.checkpoints = (
            CheckpointWatcher(job_id, spec.checkpoint_dir) if spec.checkpoint_dir else None
        )

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
    ) -> None:
        self.config = config
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
            # a job's own stop_enforcement (comment, POST /jobs) is enforced as advised
            stop_enforced_for=lambda job_id: self.decisions.policy_for(job_id).stop_enforcement,
        )
        self._jobs: dict[str, _JobSources] = {}
        self._kernel = {
            node: KernelLogSource(node, path) for node, path in (kernel_logs or {}).items()
        }
        self._telemetry = [DcgmScraper(n, url) for n, url in (telemetry_urls or {}).items()]
        self._checkpoint_iter: dict[str, int] = {}  # job -> newest saved checkpoint iteration
        # Per job, the (first, latest) progress of the current attempt already stored.
        self._progress_written: dict[str, tuple[Progress | None, Progress | None]] = {}
        self._kernel_template = config.scheduler.slurm.kernel_log_template
        self._discovered_at = float("-inf")
        self._lock = threading.Lock()
        for job in store.list_jobs():
            self._watch(job.job_id, job.spec)

    # -- registration --------------------------------------------------------------------

    def register(self, job_id: str, spec: JobSpec, *, name: str = "") -> None:
        self.store.register_job(job_id, self.adapter.name, now=self.clock(), name=name, spec=spec)
        with self._lock:
            self._watch(job_id, spec)

    def _watch(self, job_id: str, spec: JobSpec) -> None:
        if job_id in self._jobs:
            return
        self._jobs[job_id] = _JobSources(job_id, spec)
        for node, path in spec.kernel_logs.items():
            self._kernel.setdefault(node, KernelLogSource(node, path))
        attempts = self.store.list_attempts(job_id)
        if attempts:
            latest = max(attempts, key=lambda a: a.attempt)
            self.engine.resume(job_id, latest.attempt, latest.started_at, latest.nodes)
        else:
            self.engine.watch(job_id)

    def _sync_registrations(self) -> None:
        """Jobs registered through the API (another process or thread) join the loop."""
        for job in self.store.list_jobs():
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
            self._sync_registrations()
            now = self.clock()
            self._discover(now)
            snapshot = self.adapter.poll(tuple(self._jobs))
            observations = self._scheduler_observations(snapshot)
            for sources in self._jobs.values():
                observations.extend(sources.poll())
            for kernel in self._kernel.values():
                observations.extend(kernel.poll())
            for scraper in self._telemetry:
                observations.extend(scraper.poll())
            now = self.clock()
            self.engine.observe_all(observations, now)
            self._remember_progress(observations)
            result = CycleResult(now, snapshot)
            for finding in self.engine.evaluate(now):
                newest = self._checkpoint_iter.get(finding.job_id)
                result.decisions.append(self.decisions.record(finding, snapshot, now, newest))
            if self.config.service.mode == "action":
                result.executed = self.executor.step(snapshot, self.clock())
            return result

    def run(self, stop: threading.Event) -> None:
        interval = self.config.service.poll_interval_s
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.cycle()
            except (TrainmedicError, OSError) as exc:
                # The loop outlives a bad cycle (store busy, a source vanished): the next
                # cycle starts from the store and the scheduler again.
                log.error("service cycle failed: %s", exc)
            stop.wait(max(0.0, interval - (time.monotonic() - started)))

    def _scheduler_observations(self, snapshot: ClusterSnapshot) -> list[Observation]:
        if snapshot.stale:
            return []  # silence is "unknown", never "gone"
        out: list[Observation] = []
        for job in snapshot.jobs:
            if job.job_id not in self._jobs:
                continue
            if self._kernel_template:
                for name in job.nodes:
                    if name not in self._kernel:
                        path = self._kernel_template.format(node=name)
                        self._kernel[name] = KernelLogSource(name, path)
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
            stored = self.store.get_job(job.job_id)
            # A requeued job still lists its old nodes while completing: an attempt's nodes
            # are recorded once it runs.
            if stored is None or stored.state != job.state.value or stored.attempt != job.attempt:
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

    def _remember_progress(self, observations: list[Observation]) -> None:
        for obs in observations:
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
