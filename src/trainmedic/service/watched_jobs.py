"""The jobs the service watches: their sources, how they join the loop, how they are let go.

A job joins when registered (``Service.register``, or through the API from another process:
the jobs table is read once per cycle) or discovered (Slurm comment or ``[watch]`` rules).
It is let go ``unwatch_after_s`` after the scheduler shows it ended (or gone) with no advice
in progress: what its files still hold is read first, then they are closed and everything
kept about them dropped, so a long-running service stays flat in memory and fds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from trainmedic.core.engine.engine import Engine
from trainmedic.core.engine.track import REQUEUE_GRACE_S, EndedAttempt
from trainmedic.core.errors import StoreError
from trainmedic.core.observations import Observation, Progress
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import ClusterSnapshot, SchedulerAdapter
from trainmedic.service.config.sections import Config
from trainmedic.service.discovery import discover
from trainmedic.service.node_sources import NodeSources
from trainmedic.service.progress_format import LogCounts, ProgressFormatCheck
from trainmedic.service.source_pool import SourcePool
from trainmedic.service.source_status import SourceBoard
from trainmedic.sources.job_readers import DRAIN_POLLS, JobFiles, JobReaders
from trainmedic.sources.offsets import OffsetBook
from trainmedic.store import IncidentRecord, JobRecord, JobSpec, Store

log = logging.getLogger(__name__)
Clock = Callable[[], float]


class JobSources(Protocol):
    """A watched job's files, read here (``sources.job_readers.JobReaders``) or by a reader
    process (``service.source_pool.RemoteJobSources``)."""

    @property
    def logs(self) -> LogCounts: ...

    def poll(self) -> list[Observation]: ...

    def drain(self, polls: int = DRAIN_POLLS) -> list[list[Observation]]: ...

    def close(self) -> None: ...


def declare_sources(board: SourceBoard, files: JobFiles, now: float) -> None:
    """The job's sources, each unknown until it reports (``SourceBoard``)."""
    board.declare("scheduler", now, job_id=files.job_id)
    for path in files.paths():
        board.declare(f"log:{path}", now, job_id=files.job_id)
    if files.checkpoint_dir:
        board.declare(f"checkpoints:{Path(files.checkpoint_dir)}", now, job_id=files.job_id)


class WatchedJobs:
    """The part of ``Service`` that adds and lets go of watched jobs (a mixin: the state it
    uses is the service's own, set up in ``Service.__init__``)."""

    config: Config
    store: Store
    adapter: SchedulerAdapter
    clock: Clock
    engine: Engine
    sources: SourceBoard
    _jobs: dict[str, JobSources]
    _book: OffsetBook
    _pool: SourcePool | None
    _tz: tzinfo
    _nodes: NodeSources
    _kernel_template: str
    _lock: threading.Lock
    _discovered_at: float
    _retired: set[str]
    _ended_since: dict[str, float]
    _checkpoint_iter: dict[str, int]
    _progress_written: dict[str, tuple[Progress | None, Progress | None]]
    progress_format: ProgressFormatCheck

    if TYPE_CHECKING:

        def _remember_progress(
            self, observations: list[Observation], jobs: Iterable[str] | None = None
        ) -> None: ...

    # -- registration --------------------------------------------------------------------

    def register(self, job_id: str, spec: JobSpec, *, name: str = "") -> None:
        _, created = self.store.register_job_created(
            job_id, self.adapter.name, now=self.clock(), name=name, spec=spec
        )
        with self._lock:
            self._watch(job_id, spec, new=created)

    def _watch(self, job_id: str, spec: JobSpec, *, new: bool = False) -> None:
        """``new``: the job was just created in the store, so it has no attempt to resume
        (the store is not asked: jobs come and go by the thousand)."""
        if job_id in self._jobs:
            return
        files = JobFiles(job_id, spec.log_paths, spec.checkpoint_dir, spec.progress_regex)
        declare_sources(self.sources, files, self.clock())
        self._jobs[job_id] = (
            JobReaders(files, tz=self._tz, clock=self.clock, book=self._book)
            if self._pool is None
            else self._pool.watch(files)
        )
        for node, path in spec.kernel_logs.items():
            self._nodes.add_kernel_log(node, path)
        if new:
            self.engine.watch(job_id)
        else:
            self._resume(job_id)

    def _resume(self, job_id: str) -> None:
        """Start the engine where the store says the job stands: its latest attempt, and
        the one before it, whose finding may still be due (Slurm requeued the job by itself
        when a node died, and the process that saw it was killed before the incident was
        stored). Their nodes and times are the store's, not this process's memory; and
        the latest attempt is one this process met already begun, whose log it reads again
        from where the store says (the old attempt's last reports are not its progress)."""
        attempts = sorted(self.store.list_attempts(job_id), key=lambda a: a.attempt)
        if not attempts:
            self.engine.watch(job_id)
            return
        latest = attempts[-1]
        died = _nodes_found_dead(self.store.list_incidents(job_id))
        previous = None
        if len(attempts) > 1:
            before = attempts[-2]
            ended_at = before.ended_at if before.ended_at is not None else latest.started_at
            previous = EndedAttempt(
                before.attempt, before.nodes, ended_at, frozenset(died.get(before.attempt, ()))
            )
            if self.clock() - ended_at <= REQUEUE_GRACE_S:
                # Its nodes' kernel logs and telemetry still tell why it was lost.
                self._nodes.jobs_run_on(before.nodes, ended_at)
        self.engine.resume(
            job_id,
            latest.attempt,
            latest.started_at,
            latest.nodes,
            previous=previous,
            died=died.get(latest.attempt, ()),
            met_at=self.clock(),
        )

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

    def _drain(self, job_id: str, now: float) -> JobSources:
        """Read what the job's files still hold before letting them go (no line is lost to a
        service that fell behind), store its progress and checkpoints, and stop watching it.
        Only this job's progress is looked at: retiring many jobs costs each its own."""
        sources = self._jobs[job_id]
        for final in sources.drain():
            self.engine.observe_all(final, now)
            self._remember_progress(final, (job_id,))
        del self._jobs[job_id]
        return sources

    def _retire_ended(self, snapshot: ClusterSnapshot, now: float) -> None:
        """Unwatch jobs that ended (or vanished from the scheduler) ``unwatch_after_s`` ago and
        have no advice in progress: their files are closed, their state dropped, so a
        long-running service watching jobs that come and go stays flat in memory and fds."""
        if snapshot.stale:
            return  # silence is not an ending
        states = {job.job_id: job.state for job in snapshot.jobs}
        released: dict[str, JobSources] = {}
        active: set[str] | None = None  # jobs with advice in progress: asked once a cycle
        for job_id in list(self._jobs):
            state = states.get(job_id)
            if state is not None and not state.is_terminal():
                self._ended_since.pop(job_id, None)
                continue
            since = self._ended_since.setdefault(job_id, now)
            if now - since < self.config.service.unwatch_after_s:
                continue
            if active is None:
                active = {advice.job_id for advice in self.store.active_advice()}
            if job_id in active:
                continue  # a restart may still bring it back
            released[job_id] = self._drain(job_id, now)
            self.engine.unwatch(job_id)
            self._ended_since.pop(job_id, None)
            self._progress_written.pop(job_id, None)
            self._checkpoint_iter.pop(job_id, None)
            self._retired.add(job_id)
            log.info("job %s ended: unwatched", job_id)
        if released:
            self._release(released)

    def _release(self, released: Mapping[str, JobSources]) -> None:
        """Close unwatched jobs' files and drop what was kept about them: their read
        positions (in memory and stored: a restart does not watch these jobs again) and
        their source tables. A file another watched job still follows keeps its position."""
        still_followed = {path for other in self._jobs.values() for path in other.logs.paths}
        gone: list[str] = []
        for job_id, sources in released.items():
            sources.close()
            gone.extend(p for p in sources.logs.paths if p not in still_followed)
            self.sources.forget(job_id)
            self.progress_format.forget(job_id)
        for path in gone:
            self._book.forget(path)
        if self._pool is not None:
            self._pool.forget(gone)
        try:
            self.store.forget_follower_offsets(gone)
        except StoreError as exc:
            log.warning("stored offsets of unwatched jobs' logs not dropped: %s", exc)


def _nodes_found_dead(incidents: Iterable[IncidentRecord]) -> dict[int, set[str]]:
    """Per attempt, the nodes a stored hardware incident implicates: a node death already
    explained, which a restarted engine does not raise again (one incident, not two)."""
    dead: dict[int, set[str]] = {}
    for incident in incidents:
        if incident.category.is_hardware():
            dead.setdefault(incident.attempt, set()).update(incident.implicated.nodes)
    return dead


def stored_state_ended(state: str) -> bool:
    try:
        return JobState(state).is_terminal()
    except ValueError:
        return False  # "" before the first poll, or a state this version does not know
