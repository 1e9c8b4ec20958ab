"""A reader process: the files of a share of the watched jobs, read and parsed beside the
service's loop (``service.source_pool`` starts and feeds it).

Reading and parsing job logs is about half of a busy service's CPU; in a process of its own
it runs on another core while the loop's engine takes what was read already. The process
holds the jobs' ``JobReaders`` and an ``OffsetBook`` of its own, and answers messages (tuples
over a ``multiprocessing`` connection, pickled):

* first ``("zone", tz)``: how zone-less printed stamps are read (``[detect] log_timezone``);
* ``("reset", positions, window_start)``: forget every job; files start from ``positions``
  (where the store left them) and look back to ``window_start`` (the service's start);
* ``("watch", JobFiles)``; ``("close", job_ids)``: no answer;
* ``("poll",)``: every job's new lines, answered as ``("read", [JobRead], positions)`` for a
  few jobs at a time (the loop takes each while the rest is read), then ``("done", cpu_s)``
  (the process's CPU seconds so far, for the service's own accounting);
* ``("drain", job_id, polls)``: ``JobReaders.drain`` of one job, as one ``("read", ...)``;
* ``("stop",)``, or the service's end of the connection closing: the process exits.

The observations of a job and the positions its files reached travel in one message, so
what the service took and where a new reader resumes never disagree.
"""

from __future__ import annotations

import itertools
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import tzinfo
from multiprocessing.connection import Connection
from typing import Any

from trainmedic.core.observations import Observation
from trainmedic.sources.job_readers import JobFiles, JobReaders
from trainmedic.sources.offsets import FilePosition, OffsetBook

JOBS_PER_MESSAGE = 32
"""Jobs answered together: small enough that the loop starts on the first ones early."""


@dataclass(frozen=True, slots=True)
class JobRead:
    """One job's poll (or drain), and its log source's counts after it."""

    job_id: str
    observations: list[Observation]
    lines_read: int
    progress_lines: int
    paths: tuple[str, ...]
    declared: bool


class Reader:
    """The state of one reader process (kept apart from the connection, for tests)."""

    def __init__(self, tz: tzinfo) -> None:
        self._tz = tz
        self._jobs: dict[str, JobReaders] = {}
        self._book = OffsetBook()

    def reset(self, positions: list[FilePosition], window_start: float) -> None:
        for job in self._jobs.values():
            job.close()
        self._jobs = {}
        self._book = OffsetBook(positions)
        self._book.window_start = window_start

    def watch(self, files: JobFiles) -> None:
        if files.job_id not in self._jobs:
            self._jobs[files.job_id] = JobReaders(
                files, tz=self._tz, clock=time.time, book=self._book
            )

    def close(self, job_ids: tuple[str, ...]) -> None:
        for job_id in job_ids:
            job = self._jobs.pop(job_id, None)
            if job is None:
                continue
            job.close()
            for path in job.logs.paths:
                self._book.forget(path)

    def poll(self) -> Iterator[tuple[list[JobRead], list[FilePosition]]]:
        """Every job's new lines, a message's worth of jobs at a time (each sent before the
        next is read)."""
        jobs = iter(list(self._jobs.values()))
        while batch := list(itertools.islice(jobs, JOBS_PER_MESSAGE)):
            yield [_read(job, job.poll()) for job in batch], self.positions()

    def drain(self, job_id: str, polls: int) -> tuple[list[JobRead], list[FilePosition]]:
        job = self._jobs.get(job_id)
        if job is None:
            return [], []
        found = [obs for batch in job.drain(polls) for obs in batch]
        return [_read(job, found)], self.positions()

    def positions(self) -> list[FilePosition]:
        """The positions that moved since last asked: they go with the lines read to them."""
        due = self._book.due()
        self._book.saved(due)
        return due


def _read(job: JobReaders, observations: list[Observation]) -> JobRead:
    logs = job.logs
    return JobRead(
        job.files.job_id,
        observations,
        logs.lines_read,
        logs.progress_lines,
        logs.paths,
        logs.declared,
    )


def serve(conn: Connection) -> None:
    """The process's whole life: the zone (the first message), then answer messages until
    told to stop or the service is gone."""
    try:
        _, tz = conn.recv()
        reader = Reader(tz)
        while _answer(reader, conn, conn.recv()):
            pass
    except (EOFError, OSError):
        return  # the service ended (or closed its end): so does its reader


def _answer(reader: Reader, conn: Connection, message: tuple[Any, ...]) -> bool:
    kind = message[0]
    if kind == "reset":
        reader.reset(message[1], message[2])
    elif kind == "watch":
        reader.watch(message[1])
    elif kind == "close":
        reader.close(message[1])
    elif kind == "poll":
        for reads, positions in reader.poll():
            conn.send(("read", reads, positions))
        conn.send(("done", time.process_time()))
    elif kind == "drain":
        conn.send(("read", *reader.drain(message[1], message[2])))
    return bool(kind != "stop")


START = "from trainmedic.sources.reader_process import main; main()"
"""``python -c START FD``: a reader on the socket ``FD`` that the service passed down (a
fresh interpreter: nothing of the service's own program is imported or run again, and what
it sends is pickled under this module's name, not ``__main__``)."""


def main() -> None:
    # Ctrl-C in a terminal reaches the whole process group: the service stops its readers
    # itself (or its end of the socket closes), so a reader does not die mid-answer.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(Connection(int(sys.argv[1])))
