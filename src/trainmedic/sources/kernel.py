"""One node's kernel log (``/var/log/kern.log``, a ``dmesg -w`` capture, or the file the demo's
hardware-like faults append to): every new line becomes a ``LogLine`` from a system source.

Its lines are evidence about the *node*, not a job (``job_id`` is None); the engine relates
them to the jobs on that node. Because the source is ``kernel_log`` (a system source), a
strong line here may justify draining the node, which the same text in a job's stdout never
does.

With an ``OffsetBook`` a restarted service goes on where it left the log, and a log never
seen is read back only for lines dated inside the book's look-back window: an Xid from last
week, still in kern.log, is history, not news.
"""

from __future__ import annotations

import os
import time

from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.model import EvidenceSource
from trainmedic.core.observations import LogLine, Observation, SourceStale
from trainmedic.sources.follower import LogFollower
from trainmedic.sources.lines import Clock, followed_time
from trainmedic.sources.offsets import OffsetBook


class KernelLogSource:
    def __init__(
        self,
        node: str,
        path: str | os.PathLike[str],
        *,
        from_end: bool = False,
        clock: Clock = time.time,
        book: OffsetBook | None = None,
    ) -> None:
        """``from_end``: ignore what the log already holds (a real kern.log has history).
        ``book``: resume where the service left the log, look back a bounded window."""
        self.node = node
        self.path = os.fspath(path)
        self._follower = LogFollower(path, from_end=from_end, book=book)
        self._window_start = book.window_start if book is not None else float("-inf")
        self._clock = clock

    def poll(self) -> list[Observation]:
        now = self._clock()
        out: list[Observation] = []
        for line in self._follower.poll():
            prefix = parse_prefix(line.text, now=now)
            t = followed_time(
                line, prefix.timestamp, now, self._window_start, undated_backlog=False
            )
            if t is None:
                continue  # written before the look-back window, or when is unknown
            out.append(
                LogLine(
                    time=t,
                    text=line.text,
                    source=EvidenceSource.KERNEL_LOG,
                    path=self.path,
                    line_no=line.line_no,
                    node=self.node,
                )
            )
        detail = self._follower.take_stale()
        if detail is not None:
            out.append(SourceStale(now, f"kernel:{self.node}", detail, node=self.node))
        return out

    def close(self) -> None:
        self._follower.close()
