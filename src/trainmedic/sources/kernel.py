"""One node's kernel log (``/var/log/kern.log``, a ``dmesg -w`` capture, or the file the demo's
hardware-like faults append to): every new line becomes a ``LogLine`` from a system source.

Its lines are evidence about the *node*, not a job (``job_id`` is None); the engine relates
them to the jobs on that node. Because the source is ``kernel_log`` (a system source), a
strong line here may justify draining the node, which the same text in a job's stdout never
does. So a line the log's own format says a process wrote (``logger -t kernel``: a syslog tag
with a PID or another tag, a non-kern facility, journald ``_TRANSPORT`` other than kernel; see
``core.logparse.kernel_origin``) is dropped and counted, never passed on as kernel evidence.

With an ``OffsetBook`` a restarted service goes on where it left the log, and a log never
seen is read back only for lines dated inside the book's look-back window: an Xid from last
week, still in kern.log, is history, not news.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import tzinfo

from trainmedic.core.logparse.kernel_origin import Origin, kernel_origin
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.model import EvidenceSource
from trainmedic.core.observations import LogLine, Observation, SourceRecovered, SourceStale
from trainmedic.sources.follower import LogFollower
from trainmedic.sources.lines import Clock, followed_time
from trainmedic.sources.offsets import OffsetBook

log = logging.getLogger(__name__)


class KernelLogSource:
    def __init__(
        self,
        node: str,
        path: str | os.PathLike[str],
        *,
        from_end: bool = False,
        clock: Clock = time.time,
        tz: tzinfo | None = None,
        book: OffsetBook | None = None,
    ) -> None:
        """``from_end``: ignore what the log already holds (a real kern.log has history);
        ``tz``: the zone of its zone-less stamps (syslog's; None: UTC); ``book``: resume where
        the service left the log, look back a bounded window."""
        self.node = node
        self.path = os.fspath(path)
        self._follower = LogFollower(path, from_end=from_end, book=book)
        self._window_start = book.window_start if book is not None else float("-inf")
        self._clock = clock
        self._tz = tz
        self.refused = 0  # lines a process wrote (core.logparse.kernel_origin): dropped

    def poll(self) -> list[Observation]:
        now = self._clock()
        out: list[Observation] = []
        for line in self._follower.poll():
            origin = kernel_origin(line.text)
            if origin.origin is Origin.USERSPACE:
                self._refuse(line.line_no, origin.why)
                continue
            prefix = parse_prefix(origin.text, tz=self._tz, now=now)
            t = followed_time(
                line,
                origin.timestamp or prefix.timestamp,
                now,
                self._window_start,
                undated_backlog=False,
            )
            if t is None:
                continue  # written before the look-back window, or when is unknown
            out.append(
                LogLine(
                    time=t,
                    text=origin.text,
                    source=EvidenceSource.KERNEL_LOG,
                    path=self.path,
                    line_no=line.line_no,
                    node=self.node,
                )
            )
        detail = self._follower.take_stale()
        if detail is not None:
            out.append(SourceStale(now, f"kernel:{self.node}", detail, node=self.node))
        if self._follower.take_recovered():
            out.append(SourceRecovered(now, f"kernel:{self.node}", node=self.node))
        return out

    def _refuse(self, line_no: int, why: str) -> None:
        """A line a process wrote (``logger -t kernel ...``): never kernel evidence."""
        self.refused += 1
        if self.refused == 1 or self.refused % 1000 == 0:
            log.warning(
                "kernel log %s of %s: line %d is not from the kernel (%s): ignored (%d so far)",
                self.path,
                self.node,
                line_no,
                why,
                self.refused,
            )

    @property
    def missing(self) -> bool:
        """The file is missing or unreadable now (its lines cannot be evidence)."""
        return self._follower.missing

    def close(self) -> None:
        self._follower.close()
