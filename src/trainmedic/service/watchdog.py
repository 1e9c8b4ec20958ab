"""The watchdog fails open: a job trainmedic holds for longer than T goes back to normal
scheduling, even when the service that held it is dead, and even when the database is gone.

The executor records a hold in the store and in the hold file beside it (``holdfile``)
before it holds a job, and clears both once the job is released; a release that fails
leaves them open. Any hold still open after ``timeout_s`` in either record is released here
through the same scheduler adapter, after one look at the scheduler: a job that is no longer
held, or no longer known, only has its records closed (no release to retry every second).

``trainmedic serve`` runs it as a supervised child process (``[watchdog] embedded``), so it
outlives a ``kill -9`` of the service as long as a hold is open (then it exits: the next
service starts its own); ``trainmedic watchdog`` runs it apart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainmedic.core.errors import SchedulerError, StoreError, TrainmedicError
from trainmedic.schedulers.base import SchedulerAdapter
from trainmedic.service.holdfile import HoldFile
from trainmedic.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Release:
    job_id: str
    held_at: float
    released_at: float
    ok: bool
    detail: str = ""


class Watchdog:
    def __init__(
        self,
        store: Store | None,
        adapter: SchedulerAdapter,
        *,
        timeout_s: float,
        clock: Callable[[], float] = time.time,
        hold_file: HoldFile | None = None,
        open_store: Callable[[], Store] | None = None,
    ) -> None:
        """``store`` None: the database could not be opened; ``open_store`` tries again at
        every check. Holds in ``hold_file`` are released whatever the store says."""
        self.store = store
        self.adapter = adapter
        self.timeout_s = timeout_s
        self.clock = clock
        self.hold_file = hold_file
        self._open_store = open_store

    def check(self) -> list[Release]:
        """Release every hold older than the timeout; returns what it did."""
        now = self.clock()
        due = self._overdue(now - self.timeout_s)
        if not due:
            return []
        snapshot = self.adapter.poll(tuple(due))
        jobs = {job.job_id: job for job in snapshot.jobs}
        released: list[Release] = []
        for job_id, held_at in sorted(due.items()):
            job = jobs.get(job_id)
            if not snapshot.stale and (job is None or not job.held):
                self._close(job_id, now)
                why = "job no longer known" if job is None else "job no longer held"
                released.append(Release(job_id, held_at, now, True, why))
                continue
            try:
                self.adapter.release(job_id)
            except SchedulerError as exc:
                log.warning("watchdog: cannot release job %s: %s", job_id, exc)
                released.append(Release(job_id, held_at, now, False, str(exc)))
                continue
            self._close(job_id, now)
            log.warning("watchdog: released job %s held for %.1f s", job_id, now - held_at)
            released.append(Release(job_id, held_at, now, True))
        return released

    def run(
        self,
        stop: threading.Event,
        interval_s: float = 1.0,
        *,
        done: Callable[[], bool] = lambda: False,
    ) -> None:
        """Check every ``interval_s`` until ``stop`` is set, or until ``done()`` says so
        while no hold is open (an orphaned watchdog: its service is gone)."""
        while not stop.is_set():
            try:
                self.check()
                if done() and not self.holding():
                    return
            except (TrainmedicError, OSError) as exc:  # a busy store, a full disk: never die
                log.error("watchdog: %s", exc)
            stop.wait(interval_s)

    def holding(self) -> bool:
        """Some hold is open, in the store or in the hold file."""
        return bool(self._overdue(float("inf")))

    # -- internals -----------------------------------------------------------------------

    def _overdue(self, cutoff: float) -> dict[str, float]:
        """Job -> earliest open hold taken before ``cutoff``, from the store and the file."""
        due: dict[str, float] = {}
        if self.store is None and self._open_store is not None:
            try:
                self.store = self._open_store()
            except StoreError as exc:
                log.warning("watchdog: no database (%s): using the hold file", exc)
        if self.store is not None:
            try:
                for hold in self.store.holds_older_than(cutoff):
                    due[hold.job_id] = min(hold.held_at, due.get(hold.job_id, hold.held_at))
            except StoreError as exc:
                log.warning("watchdog: database unavailable (%s): using the hold file", exc)
        if self.hold_file is not None:
            for held in self.hold_file.holds():
                if held.held_at < cutoff:
                    due[held.job_id] = min(held.held_at, due.get(held.job_id, held.held_at))
        return due

    def _close(self, job_id: str, now: float) -> None:
        if self.store is not None:
            try:
                self.store.release_hold(job_id, released_at=now)
            except StoreError as exc:  # the file says it is done; the store can catch up
                log.warning("watchdog: job %s released, store not updated: %s", job_id, exc)
        if self.hold_file is not None:
            self.hold_file.remove(job_id)
