"""Where each followed file was left, so that a restarted service does not read it again.

A service that starts again must not take what its logs already held for news: a traceback
of an attempt that was requeued an hour ago, read again as if just written, is evidence
against the attempt running now. The ``OffsetBook`` remembers, per path, the file it read
(device, inode, and a hash of its first bytes, because inode numbers are reused) and how far
it read; the service stores what ``due`` offers (``store.save_follower_offsets``), confirms it
with ``saved``, and hands the stored positions back when it starts. A ``LogFollower`` asks the
book where to start when it first opens its file:

* the same file as before: where the last run left it; what follows was written since;
* a file created while followed (absent when first looked for): from its start;
* a file never seen (or replaced while the service was down) that nobody wrote to within the
  look-back window: at its end;
* any other file never seen: at most ``max_backlog_bytes`` before its end, its lines marked
  ``BACKLOG``: written before the service followed the file, no later than its mtime. Sources
  keep such a line as evidence only when its own stamp places it inside the window.

The service stores positions only when no finding is settling or waiting to be stored, so a
``kill -9`` never loses the lines a decision was being made from: they are read again, and
the store's idempotency keys make the re-derived decision a no-op.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

HEAD_BYTES = 1024  # the first bytes that tell a reused inode from the file we read
DEFAULT_LOOKBACK_S = 600.0
DEFAULT_MAX_BACKLOG_BYTES = 8 * 1024 * 1024


class LineOrigin(StrEnum):
    """When a followed line was written, relative to this service following its file."""

    LIVE = "live"  # appended while followed (or since the last run): not seen before
    BACKLOG = "backlog"  # in a never-seen file before this service first opened it


@dataclass(frozen=True, slots=True)
class FilePosition:
    """One followed file as the store keeps it."""

    path: str
    device: int
    inode: int
    head_len: int  # how many leading bytes ``head_hash`` covers
    head_hash: str  # sha256 (hex) of the first ``head_len`` bytes
    offset: int  # the next unread line starts here (what a restart resumes from)
    line_no: int  # lines before ``offset``
    saved_at: float  # when this position was reached


@dataclass(frozen=True, slots=True)
class StartPoint:
    """Where a follower starts reading a file it opens for the first time."""

    offset: int = 0
    line_no: int = 0
    mid_line: bool = False  # ``offset`` may fall inside a line: drop up to the next newline
    backlog_until: int = 0  # lines ending before this offset are BACKLOG, later ones LIVE
    written_by: float | None = None  # BACKLOG lines were written no later than this


def head_of(fd: int, size: int) -> tuple[int, str]:
    """(length, sha256 hex) of the first bytes of an open file."""
    data = os.pread(fd, min(size, HEAD_BYTES), 0)
    return len(data), hashlib.sha256(data).hexdigest()


class _Entry:
    __slots__ = ("device", "head", "inode", "line_no", "offset", "reached_at")

    def __init__(self, device: int, inode: int, head: tuple[int, str]) -> None:
        self.device = device
        self.inode = inode
        self.head = head
        self.offset = -1
        self.line_no = 0
        self.reached_at = 0.0


def _position(path: str, entry: _Entry) -> FilePosition:
    length, digest = entry.head
    return FilePosition(
        path, entry.device, entry.inode, length, digest, entry.offset, entry.line_no,
        entry.reached_at,
    )  # fmt: skip


class OffsetBook:
    def __init__(
        self,
        positions: Iterable[FilePosition] = (),
        *,
        lookback_s: float = DEFAULT_LOOKBACK_S,
        max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``lookback_s``: how far before now (the service's start) a never-seen file is
        read back for evidence."""
        self._saved = {p.path: p for p in positions}
        self._clock = clock
        self.window_start = clock() - lookback_s
        self.max_backlog_bytes = max_backlog_bytes
        self._entries: dict[str, _Entry] = {}
        # Paths whose position moved since the store last confirmed it (an ordered set):
        # ``due`` is asked every cycle, and by a reader process for every 32 jobs it answers,
        # so it must not walk every followed file.
        self._moved: dict[str, None] = {}

    def saved_positions(self) -> tuple[FilePosition, ...]:
        """The stored positions no follower has started from yet (for a reader process's
        own book: ``service.source_pool``)."""
        return tuple(self._saved.values())

    # -- a follower opens its file ---------------------------------------------------------

    def start(
        self, path: str, fd: int, st: os.stat_result, *, appeared: bool = False
    ) -> StartPoint:
        """``appeared``: the path did not exist when the follower first looked, so a file
        that is not the one read before was created while followed: all of it is new."""
        saved = self._saved.pop(path, None)
        if saved is not None and self._same_file(saved, fd, st):
            return StartPoint(offset=saved.offset, line_no=saved.line_no)
        if appeared:
            return StartPoint()
        if st.st_mtime < self.window_start:
            return StartPoint(offset=st.st_size, mid_line=st.st_size > 0)
        begin = max(0, st.st_size - self.max_backlog_bytes)
        return StartPoint(
            offset=begin,
            mid_line=begin > 0,
            backlog_until=st.st_size,
            written_by=min(st.st_mtime, self._clock()),
        )

    @staticmethod
    def _same_file(saved: FilePosition, fd: int, st: os.stat_result) -> bool:
        if (saved.device, saved.inode) != (st.st_dev, st.st_ino) or st.st_size < saved.offset:
            return False
        try:
            data = os.pread(fd, saved.head_len, 0)
        except OSError:
            return False
        return len(data) == saved.head_len and hashlib.sha256(data).hexdigest() == saved.head_hash

    # -- a follower reports how far it read ------------------------------------------------

    def note(self, path: str, fd: int, device: int, inode: int, offset: int, line_no: int) -> None:
        """The follower of ``path`` (open as ``fd``, file ``device``/``inode``) has consumed
        every line before ``offset``."""
        entry = self._entries.get(path)
        if entry is None or (entry.device, entry.inode) != (device, inode):
            entry = _Entry(device, inode, head_of(fd, offset))
            self._entries[path] = entry
        elif entry.head[0] < HEAD_BYTES and offset > entry.head[0]:
            entry.head = head_of(fd, offset)  # a young file: its head is still being written
        if (entry.offset, entry.line_no) != (offset, line_no):
            entry.offset, entry.line_no, entry.reached_at = offset, line_no, self._clock()
            self._moved[path] = None

    # -- the service stores what changed ---------------------------------------------------

    def due(self) -> list[FilePosition]:
        """Positions that moved since they were last ``saved``."""
        return [_position(path, self._entries[path]) for path in self._moved]

    def saved(self, positions: Iterable[FilePosition]) -> None:
        """The store holds these now (``due`` offers them again until this is called)."""
        for position in positions:
            entry = self._entries.get(position.path)
            if entry is not None and (entry.offset, entry.line_no) == (
                position.offset,
                position.line_no,
            ):
                self._moved.pop(position.path, None)

    def forget(self, path: str) -> None:
        """The file is no longer followed (its job was unwatched)."""
        self._entries.pop(path, None)
        self._saved.pop(path, None)
        self._moved.pop(path, None)

    def paths(self) -> tuple[str, ...]:
        """The files whose positions the book holds (for tests and diagnostics)."""
        return tuple(sorted(self._entries))
