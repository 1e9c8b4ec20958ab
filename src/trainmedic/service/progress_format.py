"""Saying, once per job, that trainmedic does not recognise the job's progress lines and how
the job declares them.

A job's logs are read in the formats ``logparse.progress`` knows (trainmedic's trainer,
Megatron, tqdm bars, HF log dicts with a step) or in the one it declared
(``progress_regex``). A job that has run for a while, printed lines, and not one of them was
progress is in neither: without progress trainmedic cannot tell a hang from a quiet job,
only crashes (scheduler state, errors in its logs). The owner is told what to write, and
the job's liveness source ``progress`` is "unknown" (a ``SourceStale``: shown in the API's
source status; the engine calls no hang on it, not even a start-up that never reported) until
a progress line arrives (``SourceRecovered``).

The check runs at ``after_s`` (the start-up grace) from when the job was first seen running,
the same instant from which the engine's start-up grace counts, and before the engine
evaluates, so an unknown format is never first reported as a start-up hang.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from trainmedic.core.observations import Observation, SourceRecovered, SourceStale

log = logging.getLogger(__name__)
SOURCE = "progress"

EXAMPLE_REGEX = r"step=(?P<iter>\\d+) loss=(?P<loss>[-\\d.eE]+)"


def unknown_format_message(
    job_id: str, lines: int, paths: tuple[str, ...], running_s: float, declared: bool
) -> str:
    where = ", ".join(paths) or "its logs"
    said = "matched its progress_regex" if declared else "was a progress line trainmedic knows"
    return (
        f"job {job_id}: none of {lines} lines read from {where} in {running_s:.0f} s of running "
        f"{said}, so trainmedic cannot tell a hang from a quiet job (crashes are still seen "
        "from the scheduler state and the errors in its logs). Declare the job's progress "
        "lines as a regex with a named group iter (optional: loss, step_time): in its opt-in, "
        f'--comment=\'{{"trainmedic": {{"progress_regex": "{EXAMPLE_REGEX}"}}}}\', or for '
        "every discovered job in the config, [watch] progress_regex"
    )


class LogCounts(Protocol):
    """What ``check_all`` reads of a job's log source (``sources.joblog.JobLogSource``)."""

    @property
    def lines_read(self) -> int: ...
    @property
    def progress_lines(self) -> int: ...
    @property
    def paths(self) -> tuple[str, ...]: ...
    @property
    def declared(self) -> bool: ...


class _HasLogs(Protocol):
    @property
    def logs(self) -> LogCounts: ...


@dataclass
class ProgressFormatCheck:
    """Per job: when it was first seen running, and whether it was told already."""

    after_s: float
    running_since: dict[str, float] = field(default_factory=dict)
    told: dict[str, str] = field(default_factory=dict)
    recovered: set[str] = field(default_factory=set)

    def running(self, job_id: str, now: float) -> None:
        self.running_since.setdefault(job_id, now)

    def forget(self, job_id: str) -> None:
        """A job let go: nothing kept about it (the soak's flat memory)."""
        self.running_since.pop(job_id, None)
        self.told.pop(job_id, None)
        self.recovered.discard(job_id)

    def check(
        self,
        job_id: str,
        now: float,
        *,
        lines: int,
        progress: int,
        paths: tuple[str, ...],
        declared: bool,
    ) -> str | None:
        """The message, the first time a job qualifies; None otherwise."""
        since = self.running_since.get(job_id)
        if job_id in self.told or since is None or progress > 0 or lines == 0:
            return None
        if now - since < self.after_s:
            return None
        message = unknown_format_message(job_id, lines, paths, now - since, declared)
        self.told[job_id] = message
        return message

    def check_all(self, jobs: Mapping[str, _HasLogs], now: float) -> list[Observation]:
        """Warn (once per job) about every watched job that qualifies; its ``progress``
        source goes "unknown", and "up" again once a progress line arrives."""
        out: list[Observation] = []
        for job_id, sources in jobs.items():
            logs = sources.logs
            if job_id in self.told:
                if logs.progress_lines > 0 and job_id not in self.recovered:
                    self.recovered.add(job_id)
                    out.append(SourceRecovered(now, SOURCE, job_id=job_id))
                continue
            message = self.check(
                job_id,
                now,
                lines=logs.lines_read,
                progress=logs.progress_lines,
                paths=logs.paths,
                declared=logs.declared,
            )
            if message is not None:
                log.warning("%s", message)
                detail = "no line read is progress: declare progress_regex"
                out.append(SourceStale(now, SOURCE, detail, job_id=job_id))
        return out
