"""A watched job's own files, read together: its logs and its checkpoint directory.

The service reads them in its own process (``service.watched_jobs.JobSources``) or, with
``[service] source_workers``, in a reader process (``sources.reader_process``); both hold a
``JobReaders`` per job, so a job's lines become the same observations either way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import tzinfo

from trainmedic.core.errors import ConfigError
from trainmedic.core.logparse.declared import compile_progress_regex
from trainmedic.core.observations import Observation
from trainmedic.sources.checkpoints import CheckpointWatcher
from trainmedic.sources.joblog import JobLogSource
from trainmedic.sources.lines import Clock
from trainmedic.sources.offsets import OffsetBook

DRAIN_POLLS = 64
"""Polls of an ended job's files before they are closed (each reads a bounded chunk)."""


@dataclass(frozen=True, slots=True)
class JobFiles:
    """What a job's readers follow, as registered (``store.JobSpec``'s file fields): plain
    values, so that it crosses to a reader process as it is."""

    job_id: str
    log_paths: tuple[str, ...] = ()
    checkpoint_dir: str = ""
    progress_regex: str = ""

    def paths(self) -> tuple[str, ...]:
        """The log paths as ``JobLogSource.paths`` first lists them (each once, in order)."""
        return tuple(dict.fromkeys(os.fspath(p) for p in self.log_paths))

    def declared(self) -> bool:
        """Whether ``JobLogSource`` reads the job's own progress format (one that compiles)."""
        if not self.progress_regex:
            return False
        try:
            compile_progress_regex(self.progress_regex)
        except ConfigError:
            return False
        return True


class JobReaders:
    def __init__(self, files: JobFiles, *, tz: tzinfo, clock: Clock, book: OffsetBook) -> None:
        self.files = files
        self.logs = JobLogSource(
            files.job_id,
            files.log_paths,
            tz=tz,
            clock=clock,
            book=book,
            progress_regex=files.progress_regex,
            runs=True,  # plain progress lines as runs: the engine takes them whole
        )
        self.checkpoints = (
            CheckpointWatcher(files.job_id, files.checkpoint_dir, clock=clock)
            if files.checkpoint_dir
            else None
        )

    def poll(self) -> list[Observation]:
        out = self.logs.poll()
        if self.checkpoints is not None:
            out.extend(self.checkpoints.poll())
        return out

    def drain(self, polls: int = DRAIN_POLLS) -> list[list[Observation]]:
        """What the files still hold, a poll at a time (each reads a bounded chunk), until one
        finds nothing or ``polls`` were made: for a job that ended, before it is let go."""
        return list(_until_empty(self.poll() for _ in range(polls)))

    def close(self) -> None:
        self.logs.close()


def _until_empty(polls: Iterable[list[Observation]]) -> Iterable[list[Observation]]:
    for found in polls:
        if not found:
            return
        yield found
