"""``tail -F`` for one file: complete new lines, safe across rotation and truncation.

* rotation (rename or delete, then a new file at the path): the old file is read to its end
  (a last line without newline included), then the new one from its start;
* truncation (the size shrinks, e.g. ``copytruncate``): read again from the start;
* a missing file is not an error: ``poll`` returns nothing and ``take_stale`` reports it once
  per disappearance;
* a partial last line is held until its newline arrives; invalid UTF-8 is replaced; a line
  longer than ``max_line_bytes`` is cut there (the rest of it is skipped, memory stays bounded).

A poll with nothing new costs one ``stat``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO

from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.sources.lines import NotRegularFile, open_regular

DEFAULT_MAX_LINE_BYTES = 64 * 1024
DEFAULT_MAX_READ_BYTES = 8 * 1024 * 1024  # per poll: a huge backlog is read over several polls
TRUNCATED_MARK = " [...truncated]"


@dataclass(frozen=True, slots=True)
class FollowedLine:
    line_no: int  # 1-based within the file generation it came from
    text: str  # without the newline


class LogFollower:
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        from_end: bool = False,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
    ) -> None:
        """``from_end``: skip what the file holds when first opened (e.g. a long kernel log);
        files that appear later, after a rotation, are always read from their start."""
        self.path = os.fspath(path)
        self._skip_existing = from_end
        self._max_line = max_line_bytes
        self._max_read = max_read_bytes
        self._file: BinaryIO | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._pos = 0
        self._line_no = 0
        self._partial = bytearray()
        self._overlong = False  # the current line exceeded max_line_bytes
        self._discard = False  # started mid-line (from_end): drop bytes up to the next newline
        self._stale_pending: str | None = None
        self._missing = False

    @property
    def missing(self) -> bool:
        return self._missing

    def take_stale(self) -> str | None:
        """Why the file cannot be read, once per disappearance; None otherwise."""
        detail, self._stale_pending = self._stale_pending, None
        return detail

    def poll(self) -> list[FollowedLine]:
        lines: list[FollowedLine] = []
        try:
            st = os.stat(self.path)
        except OSError as exc:
            # Gone or unreadable: drain what the old file (renamed, deleted) still holds.
            if self._file is not None:
                self._read(lines, self._max_read)
            else:
                self._mark_missing(f"{self.path}: {exc.strerror or exc}")
            return lines
        identity = (st.st_dev, st.st_ino)
        if self._file is not None and identity != self._identity:
            self._read(lines, self._max_read)  # rotated: finish the old file first
            self._flush_partial(lines)
            self._close()
        if self._file is None:
            if not self._open(st.st_size):
                return lines
        elif st.st_size < self._pos:
            self._restart_from_top()  # truncated in place
        if st.st_size > self._pos:
            self._read(lines, self._max_read)
        return lines

    def close(self) -> None:
        self._close()

    # -- internals -----------------------------------------------------------------------

    def _mark_missing(self, detail: str) -> None:
        if not self._missing:
            self._missing = True
            self._stale_pending = detail

    def _open(self, size: int) -> bool:
        try:
            handle = open_regular(self.path)  # a FIFO or /dev/zero would stall the loop
        except OSError as exc:
            if isinstance(exc, NotRegularFile) and not self._missing:
                BAD_INPUT.count(BadInput.NOT_REGULAR_FILE)
            self._mark_missing(f"{self.path}: {exc.strerror or exc}")
            return False
        st = os.fstat(handle.fileno())
        self._file = handle
        self._identity = (st.st_dev, st.st_ino)
        self._missing = False
        self._stale_pending = None
        self._line_no = 0
        self._partial.clear()
        self._overlong = False
        self._pos = 0
        self._discard = False
        if self._skip_existing and size > 0:
            handle.seek(size - 1)
            self._discard = handle.read(1) != b"\n"  # mid-line: drop its rest
            self._pos = size
        self._skip_existing = False
        return True

    def _restart_from_top(self) -> None:
        assert self._file is not None
        self._file.seek(0)
        self._pos = 0
        self._line_no = 0
        self._partial.clear()
        self._overlong = False
        self._discard = False

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._identity = None

    def _read(self, out: list[FollowedLine], budget: int) -> None:
        assert self._file is not None
        while budget > 0:
            chunk = self._file.read(min(budget, 1024 * 1024))
            if not chunk:
                return
            budget -= len(chunk)
            self._pos += len(chunk)
            self._split(chunk, out)

    def _split(self, chunk: bytes, out: list[FollowedLine]) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._discard:
                if end < 0:
                    return
                self._discard = False
                start = end + 1
                continue
            if not self._overlong:
                room = self._max_line - len(self._partial)
                if len(piece) > room:
                    self._partial += piece[:room]
                    self._overlong = True
                else:
                    self._partial += piece
            if end < 0:
                return
            self._emit(out)
            start = end + 1

    def _emit(self, out: list[FollowedLine]) -> None:
        text = self._partial.decode("utf-8", errors="replace").rstrip("\r")
        if self._overlong and len(self._partial) >= self._max_line:
            text += TRUNCATED_MARK
            BAD_INPUT.count(BadInput.LONG_LINE)
        self._line_no += 1
        out.append(FollowedLine(self._line_no, text))
        self._partial.clear()
        self._overlong = False

    def _flush_partial(self, out: list[FollowedLine]) -> None:
        """A rotated file will get no more bytes: its unterminated last line is complete."""
        if self._partial:
            self._emit(out)
