"""Reader processes for the watched jobs' files (``[service] source_workers`` = N > 0).

A service watching hundreds of jobs spends about half of its CPU reading and parsing their
logs. With N reader processes (``sources.reader_process``) that part runs on other cores:
each job is read by one of them (the one with the fewest jobs when it joined), and a cycle
asks every reader to poll, then takes each answer as it comes (a few jobs at a time) while
the readers go on. Nothing else changes: the same ``JobReaders`` read the same lines into the
same observations, each job's in order; only the order between jobs differs.

A reader that dies (killed, out of memory) is started again at the next cycle and given its
jobs back, each file from the last position it reported, which came in the same message as
the lines read up to it: nothing is lost, nothing taken twice. Its jobs miss that one cycle.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import tzinfo
from multiprocessing.connection import Connection, wait
from typing import Any

from trainmedic.core.observations import Observation
from trainmedic.sources.job_readers import DRAIN_POLLS, JobFiles
from trainmedic.sources.offsets import FilePosition
from trainmedic.sources.reader_process import START, JobRead

log = logging.getLogger(__name__)

ANSWER_TIMEOUT_S = 120.0
"""A reader silent this long in a poll is taken for stuck: it is killed and started again."""


@dataclass
class ReportedCounts:
    """What the service reads of a job's log source (``progress_format``), as its reader
    last reported it."""

    paths: tuple[str, ...]
    declared: bool
    lines_read: int = 0
    progress_lines: int = 0


class RemoteJobSources:
    """A watched job whose files a reader process reads (``service.watched_jobs.JobSources``)."""

    def __init__(self, pool: SourcePool, files: JobFiles) -> None:
        self._pool = pool
        self.files = files
        self.logs = ReportedCounts(files.paths(), files.declared())

    def poll(self) -> list[Observation]:
        return [obs for batch in self._pool.drain(self.files.job_id, 1) for obs in batch]

    def drain(self, polls: int = DRAIN_POLLS) -> list[list[Observation]]:
        return self._pool.drain(self.files.job_id, polls)

    def close(self) -> None:
        self._pool.close_job(self.files.job_id)


class Polling:
    """One poll of every reader, under way: ``answers`` yields the observations of a few
    jobs at a time, as they come, until every reader has answered."""

    def __init__(
        self, pool: SourcePool, waiting: dict[Any, _Slot], carried: list[list[Observation]]
    ) -> None:
        self._pool = pool
        self._waiting = waiting
        self._carried = carried

    @property
    def done(self) -> bool:
        return not self._waiting and not self._carried

    def answers(self) -> Iterator[list[Observation]]:
        while self._carried:
            yield self._carried.pop(0)
        waiting = self._waiting
        while waiting:
            ready = wait(list(waiting), timeout=ANSWER_TIMEOUT_S)
            if not ready:
                for slot in waiting.values():
                    self._pool._lost(slot, f"no answer in {ANSWER_TIMEOUT_S:.0f} s")
                waiting.clear()
                return
            for conn in ready:
                slot = waiting[conn]
                message = self._pool._receive(slot)
                if message is None or message[0] == "done":
                    del waiting[conn]
                    if message is not None:
                        slot.reported_cpu_s = message[1]
                        self._pool._answered(slot)
                else:
                    yield self._pool._take(message)


@dataclass
class _Slot:
    process: subprocess.Popen[bytes] | None = None
    conn: Connection | None = None
    jobs: set[str] = field(default_factory=set)
    cpu_s: float = 0.0  # CPU seconds of this slot's readers, ended ones included
    reported_cpu_s: float = 0.0  # the running reader's, as it last said
    polling: bool = False  # a poll was asked and its last answer has not come yet
    later: list[tuple[Any, ...]] = field(default_factory=list)  # told once it has


class SourcePool:
    def __init__(self, workers: int, tz: tzinfo) -> None:
        self._tz = tz
        self._slots = [_Slot() for _ in range(workers)]
        self._jobs: dict[str, RemoteJobSources] = {}
        self._owner: dict[str, _Slot] = {}
        self._known: dict[str, FilePosition] = {}  # where each file was left, as reported
        self._due: dict[str, FilePosition] = {}  # reported, not yet stored
        self._window_start = float("-inf")
        self._polling: Polling | None = None  # the poll under way
        self._carried: list[list[Observation]] = []  # read, not yet handed out

    # -- the service's state -----------------------------------------------------------------

    def reset(self, saved: Iterable[FilePosition], window_start: float) -> None:
        """Start over from what the store holds (service start, taking the lead)."""
        self._settle()  # answers to the old state's last poll: dropped with it
        self._carried = []
        self._jobs, self._owner, self._due = {}, {}, {}
        self._known = {p.path: p for p in saved}
        self._window_start = window_start
        for slot in self._slots:
            slot.jobs = set()
            if slot.conn is not None:
                self._send(slot, ("reset", list(self._known.values()), window_start))

    def watch(self, files: JobFiles) -> RemoteJobSources:
        slot = min(self._slots, key=lambda s: len(s.jobs))
        job = RemoteJobSources(self, files)
        self._jobs[files.job_id] = job
        self._owner[files.job_id] = slot
        slot.jobs.add(files.job_id)
        self._tell(slot, ("watch", files))
        return job

    def close_job(self, job_id: str) -> None:
        slot = self._owner.pop(job_id, None)
        self._jobs.pop(job_id, None)
        if slot is None:
            return
        slot.jobs.discard(job_id)
        self._tell(slot, ("close", (job_id,)))

    def forget(self, paths: Iterable[str]) -> None:
        """Files no longer followed: their positions are not stored again."""
        for path in paths:
            self._known.pop(path, None)
            self._due.pop(path, None)

    def due(self) -> list[FilePosition]:
        return list(self._due.values())

    def saved(self, positions: Iterable[FilePosition]) -> None:
        for position in positions:
            if self._due.get(position.path) == position:
                del self._due[position.path]

    # -- reading -------------------------------------------------------------------------------

    def start_poll(self) -> Polling:
        """Ask every reader to poll its jobs; ``Polling.answers`` takes what they read. The
        loop does its other work (the scheduler's poll) while they read."""
        carried = self._carried + self._settle()
        self._carried = []
        waiting: dict[Any, _Slot] = {}
        for slot in self._slots:
            if slot.jobs and self._started(slot) and self._send(slot, ("poll",)):
                waiting[slot.conn] = slot
                slot.polling = True
        self._polling = Polling(self, waiting, carried)
        return self._polling

    def _settle(self) -> list[list[Observation]]:
        """What a poll left unread (a cycle that failed before taking it) is read now, so
        the next answer is the next question's; it is handed out with the next poll (the
        readers moved past it: dropped, it would be lost)."""
        polling, self._polling = self._polling, None
        if polling is None or polling.done:
            return []
        return list(polling.answers())

    def drain(self, job_id: str, polls: int) -> list[list[Observation]]:
        self._carried.extend(self._settle())
        slot = self._owner.get(job_id)
        if slot is None or not self._started(slot):
            return []
        if not self._send(slot, ("drain", job_id, polls)):
            return []
        message = self._receive(slot)
        if message is None:
            return []
        found = self._take(message)
        return [found] if found else []

    def cpu_s(self) -> float:
        """CPU seconds the readers used, as they reported at their last poll's end."""
        return sum(slot.cpu_s + slot.reported_cpu_s for slot in self._slots)

    def pids(self) -> list[int]:
        """The running readers' process ids (for resource accounting)."""
        return [
            slot.process.pid
            for slot in self._slots
            if slot.process is not None and slot.process.pid is not None
        ]

    def stop(self) -> None:
        for slot in self._slots:
            if slot.conn is not None:
                self._send(slot, ("stop",))
            _end(slot.process, grace_s=5.0)
            self._drop(slot)

    def _take(self, message: tuple[Any, ...]) -> list[Observation]:
        reads: list[JobRead] = message[1]
        for position in message[2]:  # a closed job's files are no longer reported
            self._known[position.path] = self._due[position.path] = position
        out: list[Observation] = []
        for read in reads:
            job = self._jobs.get(read.job_id)
            if job is None:
                continue  # closed while it was being read: let go
            job.logs.lines_read, job.logs.progress_lines = read.lines_read, read.progress_lines
            job.logs.paths, job.logs.declared = read.paths, read.declared
            out.extend(read.observations)
        return out

    # -- the processes -----------------------------------------------------------------------

    def _started(self, slot: _Slot) -> bool:
        """The slot's reader runs (started again, with its jobs, if it had died)."""
        if slot.process is not None and slot.process.poll() is None and slot.conn is not None:
            return True
        if slot.process is not None:
            log.error("source reader %s ended (exit %s): started again", slot.process.pid,
                      slot.process.poll())  # fmt: skip
        self._drop(slot)
        ours, theirs = socket.socketpair()
        try:
            slot.process = subprocess.Popen(
                [sys.executable, "-c", START, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        except OSError as exc:
            ours.close()
            log.error("source reader not started: %s", exc)
            return False
        finally:
            theirs.close()
        slot.conn = Connection(ours.detach())
        ok = self._send(slot, ("zone", self._tz))
        ok = ok and self._send(slot, ("reset", list(self._known.values()), self._window_start))
        for job_id in sorted(slot.jobs):
            ok = ok and self._send(slot, ("watch", self._jobs[job_id].files))
        return ok

    def _tell(self, slot: _Slot, message: tuple[Any, ...]) -> None:
        """A message with no answer. While the reader answers a poll it is kept until the
        last answer came: the reader, blocked sending answers the loop has not read yet,
        reads nothing, and a loop sending it more than a socket buffer (a discovery of
        hundreds of jobs) would block too, each waiting for the other."""
        if slot.conn is None:
            return  # a reader started later is told its jobs then
        if slot.polling:
            slot.later.append(message)
        else:
            self._send(slot, message)

    def _answered(self, slot: _Slot) -> None:
        """The reader's poll is answered: what was kept for it is sent now."""
        slot.polling = False
        later, slot.later = slot.later, []
        for message in later:
            if not self._send(slot, message):
                return

    def _send(self, slot: _Slot, message: tuple[Any, ...]) -> bool:
        assert slot.conn is not None
        try:
            slot.conn.send(message)
        except (OSError, ValueError) as exc:  # a broken pipe: the reader is gone
            self._lost(slot, str(exc))
            return False
        return True

    def _receive(self, slot: _Slot) -> tuple[Any, ...] | None:
        assert slot.conn is not None
        try:
            message: tuple[Any, ...] = slot.conn.recv()
        except (EOFError, OSError) as exc:
            self._lost(slot, str(exc) or type(exc).__name__)
            return None
        return message

    def _lost(self, slot: _Slot, why: str) -> None:
        log.error("source reader lost (%s): its jobs are read again next cycle", why)
        _end(slot.process)
        self._drop(slot, keep_process=True)

    @staticmethod
    def _drop(slot: _Slot, *, keep_process: bool = False) -> None:
        slot.cpu_s += slot.reported_cpu_s
        slot.reported_cpu_s = 0.0
        slot.polling, slot.later = False, []  # a new reader is told the whole state
        if slot.conn is not None:
            slot.conn.close()
        slot.conn = None
        if not keep_process:
            slot.process = None


def _end(process: subprocess.Popen[bytes] | None, grace_s: float = 0.0) -> None:
    """The reader exits (killed after ``grace_s``) and is reaped: no zombie is left."""
    if process is None:
        return
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
