"""What the service stores each cycle so that a restart loses nothing and repeats nothing:
decisions (a finding the store refused is tried again next cycle), how far each log was read,
each job's progress and checkpoints (for the goodput accounting and the restart advice), and
that a job ended.

What a finding rests on is stored as consumed (a log's offset, a job's ended state) only
once no finding settles or waits to be stored: a service killed in between (or a standby
taking the lead) meets the evidence again and makes the finding itself. What else a finding
rests on is in the store before the finding is due: each attempt's nodes and start and end
times (``scheduler_observations``), which a service that starts or takes the lead resumes
for the latest attempt and the one before it (``WatchedJobs._resume``), so a node death
Slurm requeued the job for is blamed on the lost attempt's node even when the new attempt
was stored first.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from trainmedic.core.engine.engine import Engine, Finding
from trainmedic.core.errors import StoreError
from trainmedic.core.observations import CheckpointSaved, Observation, Progress
from trainmedic.schedulers.base import ClusterSnapshot
from trainmedic.service.decisions import Decision, DecisionRecorder
from trainmedic.sources.offsets import OffsetBook
from trainmedic.store import CheckpointSeen, JobStateChange, NotFound, ProgressWrite, Store

if TYPE_CHECKING:
    from trainmedic.service.source_pool import SourcePool
    from trainmedic.service.watched_jobs import JobSources

log = logging.getLogger(__name__)


class DurableState:
    """The part of ``Service`` that writes to the store (a mixin: the state it uses is the
    service's own, set up in ``Service.__init__``)."""

    store: Store
    engine: Engine
    decisions: DecisionRecorder
    _jobs: dict[str, JobSources]
    _book: OffsetBook
    _pool: SourcePool | None
    _unstored: list[Finding]
    _ended_due: dict[str, tuple[str, int]]  # job -> (terminal state, attempt) not yet stored
    _checkpoint_iter: dict[str, int]
    _progress_written: dict[str, tuple[Progress | None, Progress | None]]

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

    def _findings_stored(self) -> bool:
        """No finding settles or waits to be stored: what the findings so far rest on may be
        stored as consumed. Until then a restart (or the next leader) must meet it again."""
        return not self._unstored and not self.engine.settling

    def _save_ended_states(self, now: float) -> None:
        """Store the jobs the scheduler showed ended (held back by ``_scheduler_observations``
        until now), in one transaction: a service that starts, or takes the lead, lets a job
        stored as ended go unwatched, so its ending is stored only once the finding it led to
        is (one job's settling finding holds back its own ending, not another job's)."""
        waiting = {f.job_id for f in self._unstored}
        ready = {
            job_id: due
            for job_id, due in self._ended_due.items()
            if job_id not in waiting and not self.engine.settles(job_id)
        }
        if not ready:
            return
        changes = [JobStateChange(j, state, attempt, now) for j, (state, attempt) in ready.items()]
        try:
            self.store.record_job_states(changes)
        except NotFound:
            # A job no longer stored (removed meanwhile): nothing to mark for it; the others
            # one by one, so one missing row does not hold back every ending.
            for change in changes:
                with contextlib.suppress(NotFound):
                    self.store.record_job_states([change])
        except StoreError as exc:
            log.warning("ended states of %d jobs not stored (tried again): %s", len(ready), exc)
            return
        for job_id in ready:
            del self._ended_due[job_id]

    def _save_offsets(self) -> None:
        """Store how far each log was read. Not while a finding settles or waits to be
        stored: a restart must read its lines again."""
        if not self._findings_stored():
            return
        due = self._book.due()
        read_apart = self._pool.due() if self._pool is not None else []
        try:
            self.store.save_follower_offsets(due + read_apart)
        except StoreError as exc:
            log.warning("log offsets not stored (next cycle tries again): %s", exc)
            return
        self._book.saved(due)
        if self._pool is not None:
            self._pool.saved(read_apart)

    def _remember_progress(
        self, observations: list[Observation], jobs: Iterable[str] | None = None
    ) -> None:
        """Store the cycle's checkpoints and each job's first (of a new attempt) and latest
        progress (of ``jobs``; None: every watched job): the progress of every job in one
        transaction (``record_progress``), in the order ``update_job_progress`` calls would
        have written it."""
        seen: dict[str, list[CheckpointSeen]] = {}
        writes: list[ProgressWrite] = []
        for obs in observations:
            if not isinstance(obs, CheckpointSaved):
                continue
            if obs.job_id in self._jobs:
                seen.setdefault(obs.job_id, []).append(
                    CheckpointSeen(obs.iteration, obs.time, begun=obs.in_progress)
                )
            if not obs.in_progress and obs.iteration > self._checkpoint_iter.get(obs.job_id, -1):
                self._checkpoint_iter[obs.job_id] = obs.iteration
                if obs.job_id in self._jobs:
                    writes.append(
                        ProgressWrite(
                            obs.job_id, checkpoint_iteration=obs.iteration, checkpoint_at=obs.time
                        )
                    )
        for job_id, checkpoints in seen.items():
            self.store.record_checkpoints(job_id, checkpoints)
        written: dict[str, tuple[Progress | None, Progress | None]] = {}
        for job_id in self._jobs if jobs is None else jobs:
            first, last = self.engine.progress_of(job_id)
            written_first, written_last = self._progress_written.get(job_id, (None, None))
            if last is None or last is written_last:
                continue
            if first is not None and first is not written_first:
                # A new attempt's first progress: its start of productive work is exact.
                writes.append(
                    ProgressWrite(job_id, progress_at=first.time, iteration=first.iteration)
                )
            writes.append(ProgressWrite(job_id, progress_at=last.time, iteration=last.iteration))
            written[job_id] = (first, last)
        self.store.record_progress(writes)
        # Only once stored: a refused write is tried again next cycle.
        self._progress_written.update(written)
