"""A watched job driven through the service's reading path in a unit test: a real log file read
by ``JobLogSource``, its observations fed to the ``Engine`` on an injected clock. The live-path
tests of a log format share it (each writes its own lines and asserts the finding)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.engine.engine import Engine
from trainmedic.core.observations import JobStatus
from trainmedic.core.states import JobState
from trainmedic.sources.joblog import JobLogSource

T0 = 1_800_000_000.0


def stamp(t: float) -> str:
    """``t`` as a log line's ``YYYY-mm-dd HH:MM:SS`` (UTC)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


class LiveJob:
    """Job ``j`` running on node1 since ``T0``, its log at ``log`` (holding ``first``)."""

    def __init__(self, log: Path, first: str = "") -> None:
        log.write_text(first)
        self.log = log
        self.now = T0
        self.engine = Engine(SMALL_JOB, settle_s=0.5)
        self.engine.watch("j")
        self.engine.observe(JobStatus(T0, "j", JobState.RUNNING, ("node1",), 0), T0)
        self.source = JobLogSource("j", [log], clock=lambda: self.now)

    def write(self, text: str, at: float) -> None:
        """Append ``text`` at time ``at`` and feed what the source reads to the engine."""
        self.now = at
        with self.log.open("a") as f:
            f.write(text)
        self.engine.observe_all(self.source.poll(), at)

    def train(self, line: Callable[[float, int], str], steps: int = 30) -> None:
        """One line a second (``line(now, i)``, i from 1), no finding while it trains."""
        for i in range(1, steps + 1):
            self.write(line(T0 + i, i), T0 + i)
            assert self.engine.evaluate(self.now) == []
