"""The watchdog fails open: a job trainmedic holds for longer than T goes back to normal
scheduling, even when the service that held it is dead.

It is its own process (``trainmedic watchdog``) sharing only the store with the service: the
executor records a hold before it holds a job and clears it once the job is released; any
hold still open after ``timeout_s`` is released here, through the same scheduler adapter.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainmedic.core.errors import SchedulerError, StoreError
from trainmedic.schedulers.base import SchedulerAdapter
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
        store: Store,
        adapter: SchedulerAdapter,
        *,
        timeout_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.adapter = adapter
        self.timeout_s = timeout_s
        self.clock = clock

    def check(self) -> list[Release]:
        """Release every hold older than the timeout; returns what it did."""
        now = self.clock()
        released: list[Release] = []
        for hold in self.store.holds_older_than(now - self.timeout_s):
            try:
                self.adapter.release(hold.job_id)
            except SchedulerError as exc:
                log.warning("watchdog: cannot release job %s: %s", hold.job_id, exc)
                released.append(Release(hold.job_id, hold.held_at, now, False, str(exc)))
                continue
            self.store.release_hold(hold.job_id, released_at=now)
            log.warning(
                "watchdog: released job %s held for %.1f s", hold.job_id, now - hold.held_at
            )
            released.append(Release(hold.job_id, hold.held_at, now, True))
        return released

    def run(self, stop: threading.Event, interval_s: float = 1.0) -> None:
        while not stop.is_set():
            try:
                self.check()
            except StoreError as exc:  # a busy or missing store: try again, never die
                log.error("watchdog: %s", exc)
            stop.wait(interval_s)
