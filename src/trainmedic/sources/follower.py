"""``tail -F`` for one file: complete new lines, safe across rotation and truncation.

* rotation (rename or delete, then a new file at the path): the old file is read to its end
  (a last line without newline included), then the new one from its start;
* a deleted file is read to its end (that last line included), then closed at once, not held
  open until a new file appears;
* truncation (the size shrinks, e.g. ``copytruncate``): read again from the start;
* a missing or unreadable file is not an error: ``poll`` returns nothing, ``take_stale``
  reports it once per disappearance and ``take_recovered`` once when it can be read again (a
  read error, e.g. EIO on a network file system, closes the file and counts as one);
* a partial last line is held until its newline arrives; invalid UTF-8 is replaced; a line
  longer than ``max_line_bytes`` is cut there (the rest of it is skipped, memory stays bounded);
* a carriage return ends a line too (``\r\n`` stays one line end): a progress bar redrawn in
  place (tqdm, Lightning, the HF Trainer) writes ``\r`` and no newline until it closes, so
  each state it draws is a line, read as it is drawn; blank redraws are left out.

With an ``OffsetBook`` the first open starts where the service's previous run left the file
(or, for a file never seen, within the book's look-back window), and every line says whether
it is new (``LIVE``) or was written before this run followed the file (see ``offsets``).

A poll with nothing new costs one ``stat``; one with new bytes reads as many as the ``stat``
showed (no read sized for a backlog, no empty read to find the end).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO, cast

from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.sources.lines import NotRegularFile, open_regular
from trainmedic.sources.offsets import LineOrigin, OffsetBook, StartPoint

DEFAULT_MAX_LINE_BYTES = 64 * 1024
DEFAULT_MAX_READ_BYTES = 8 * 1024 * 1024  # per poll: a huge backlog is read over several polls
TRUNCATED_MARK = " [...truncated]"


@dataclass(frozen=True, slots=True)
class FollowedLine:
    line_no: int  # 1-based within the file generation it came from
    text: str  # without the newline
    origin: LineOrigin = LineOrigin.LIVE
    written_by: float | None = None  # BACKLOG: written no later than this


@dataclass(frozen=True, slots=True)
class FollowedBlock:
    """Lines read in one go, all new or all backlog: ``count`` lines numbered from
    ``first_line_no``, joined by ``\n`` in ``text`` (each as ``FollowedLine.text``)."""

    first_line_no: int
    count: int
    text: str
    origin: LineOrigin = LineOrigin.LIVE
    written_by: float | None = None  # as FollowedLine's

    def lines(self) -> list[FollowedLine]:
        numbers = range(self.first_line_no, self.first_line_no + self.count)
        texts = self.text.split("\n")
        origin, written_by = self.origin, self.written_by
        return [FollowedLine(n, t, origin, written_by) for n, t in zip(numbers, texts, strict=True)]


Followed = FollowedLine | FollowedBlock


class LogFollower:
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        from_end: bool = False,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        book: OffsetBook | None = None,
    ) -> None:
        """``from_end``: skip what the file holds when first opened (e.g. a long kernel log);
        files that appear later, after a rotation, are always read from their start.
        ``book``: where the first open starts (it overrides ``from_end``), and where this
        follower reports how far it read."""
        self.path = os.fspath(path)
        self._skip_existing = from_end
        self._book = book
        self._first_open = True
        self._line_start = 0  # file offset where the line being assembled begins
        self._origin = StartPoint()  # where the backlog of a never-seen file ends
        self._max_line = max_line_bytes
        self._max_read = max_read_bytes
        self._file: BinaryIO | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._pos = 0
        self._line_no = 0
        self._partial = bytearray()
        self._overlong = False  # the current line exceeded max_line_bytes
        self._discard = False  # started mid-line (from_end): drop bytes up to the next line end
        self._after_cr = False  # the last read ended with \r: a \n first in the next ends nothing
        self._stale_pending: str | None = None
        self._recovered_pending = False
        self._missing = False
        self._resume: tuple[tuple[int, int], int] | None = None  # (identity, pos) after EIO
        self._missing_at_first = False  # absent at the first poll: created while we watch
        self._want_blocks = False  # this poll may give FollowedBlock (poll_blocks)

    @property
    def missing(self) -> bool:
        return self._missing

    def take_stale(self) -> str | None:
        """Why the file cannot be read, once per disappearance; None otherwise."""
        detail, self._stale_pending = self._stale_pending, None
        return detail

    def take_recovered(self) -> bool:
        """True once when a file reported stale can be read again."""
        recovered, self._recovered_pending = self._recovered_pending, False
        return recovered

    def poll(self) -> list[FollowedLine]:
        self._want_blocks = False
        return cast(list[FollowedLine], self._poll())

    def poll_blocks(self) -> list[FollowedLine | FollowedBlock]:
        """``poll``, but a chunk of new lines read in one go comes as one ``FollowedBlock``
        (no object per line: ``joblog`` reads a block of plain progress lines whole)."""
        self._want_blocks = True
        return self._poll()

    def _poll(self) -> list[FollowedLine | FollowedBlock]:
        lines: list[FollowedLine | FollowedBlock] = []
        try:
            st = os.stat(self.path)
        except OSError as exc:
            # Gone or unreadable: drain what the old file (renamed, deleted) still holds.
            if self._file is not None:
                if self._read(lines, self._max_read) and self._deleted():
                    # Deleted and read to its end: let it go (held open, a deleted file keeps
                    # its disk space and an fd). A renamed one is kept until the new file
                    # appears at the path: its writer may still append during the rotation.
                    self._flush_partial(lines)
                    self._close()
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
            # Only what the stat saw (what came since is read next poll): a read sized to the
            # budget (megabytes) costs far more than the few hundred bytes a poll finds.
            self._read(lines, min(self._max_read, st.st_size - self._pos))
        if self._book is not None and self._file is not None and self._identity is not None:
            self._book.note(self.path, self._file.fileno(), *self._identity, *self._resume_at())
        return lines

    def _resume_at(self) -> tuple[int, int]:
        """(offset, line number) a later run resumes from: the start of the unfinished line."""
        return self._line_start, self._line_no

    def close(self) -> None:
        self._close()

    # -- internals -----------------------------------------------------------------------

    def _mark_missing(self, detail: str) -> None:
        if self._first_open:
            self._missing_at_first = True
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
        if self._missing and self._stale_pending is None:
            self._recovered_pending = True  # its staleness was reported: report the end too
        self._missing = False
        self._stale_pending = None
        resume, self._resume = self._resume, None
        if resume is not None and resume[0] == self._identity and resume[1] <= size:
            handle.seek(resume[1])  # the same file after a read error: go on where it stopped
            self._pos = resume[1]
            return True
        self._line_no = 0
        self._partial.clear()
        self._overlong = False
        self._pos = 0
        self._discard = False
        self._after_cr = False
        start = StartPoint()
        if self._book is not None and self._first_open:
            start = self._book.start(
                self.path, handle.fileno(), st, appeared=self._missing_at_first
            )
        elif self._skip_existing and size > 0:
            start = StartPoint(offset=size, mid_line=True)
        self._first_open = self._skip_existing = False
        self._origin = start
        self._line_no = start.line_no
        if start.offset > 0:
            handle.seek(start.offset - 1)
            # Inside a line (or not known to be at a line's start): drop its rest.
            self._discard = start.mid_line and handle.read(1) != b"\n"
            handle.seek(start.offset)
            self._pos = start.offset
        self._line_start = self._pos
        return True

    def _restart_from_top(self) -> None:
        assert self._file is not None
        self._file.seek(0)
        self._pos = 0
        self._line_start = 0
        self._origin = StartPoint()  # rewritten in place while followed: all of it is new
        self._line_no = 0
        self._partial.clear()
        self._overlong = False
        self._discard = False
        self._after_cr = False

    def _deleted(self) -> bool:
        """The open file has no name left (unlinked)."""
        assert self._file is not None
        try:
            return os.fstat(self._file.fileno()).st_nlink == 0
        except OSError:
            return True

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._identity = None

    def _read(self, out: list[Followed], budget: int) -> bool:
        """Read up to ``budget`` bytes; True when the end of the file was reached."""
        assert self._file is not None
        while budget > 0:
            want = min(budget, 1024 * 1024)
            try:
                chunk = self._file.read(want)
            except OSError as exc:
                # The file cannot be read now: unknown, not an error of the whole service
                # loop. Reopened once readable, where it stopped if it is the same file.
                if self._identity is not None:
                    self._resume = (self._identity, self._pos)
                self._close()
                self._mark_missing(f"{self.path}: {exc.strerror or exc}")
                return False
            if not chunk:
                return True
            budget -= len(chunk)
            base = self._pos
            self._pos += len(chunk)
            self._split(chunk, base, out)
            if len(chunk) < want:
                return True  # a buffered read stops short only at the end: no read to tell
        return False

    def _split(self, chunk: bytes, base: int, out: list[Followed]) -> None:
        """``base``: the file offset of ``chunk[0]``."""
        if self._split_plain(chunk, base, out):
            return
        start = 0
        while True:
            if self._after_cr:
                if start >= len(chunk):
                    return
                self._after_cr = False
                if chunk[start] == 0x0A:  # the \n of a \r\n split between two reads
                    start += 1
                    self._line_start = base + start
                    continue
            end = _line_end(chunk, start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            after = end + 1  # where the next line starts
            redraw = end >= 0 and chunk[end] == 0x0D  # a lone \r (not \r\n)
            if redraw and after < len(chunk) and chunk[after] == 0x0A:
                after += 1
                redraw = False
            elif redraw and after == len(chunk):
                self._after_cr = True
            if self._discard:
                if end < 0:
                    return
                self._discard = False
                start = after
                self._line_start = base + start
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
            if redraw and not self._partial.strip():
                self._partial.clear()  # a bar erased before its redraw: no line
                self._overlong = False
            else:
                self._emit(out, base + end)
            start = after
            self._line_start = base + start

    def _split_plain(self, chunk: bytes, base: int, out: list[Followed]) -> bool:
        """``_split`` of the common chunk, at C speed: ``\n`` line ends only, no line over the
        cap, all of its lines new (or all backlog), nothing to drop first. False (nothing
        done) for any other chunk, which ``_split`` reads byte by byte."""
        last = chunk.rfind(b"\n")
        if last < 0 or self._after_cr or self._discard or self._overlong or b"\r" in chunk:
            return False
        pieces = chunk[:last].split(b"\n")
        room = self._max_line
        rest = len(chunk) - last - 1
        if len(self._partial) + len(pieces[0]) > room or rest > room:
            return False
        if len(pieces) > 1 and max(map(len, pieces)) > room:
            return False
        backlog_until = self._origin.backlog_until
        first_end = base + len(pieces[0])
        backlog = base + last < backlog_until
        if not backlog and first_end < backlog_until:
            return False  # the backlog ends inside the chunk
        self._partial += pieces[0]
        pieces[0] = bytes(self._partial)
        first = self._line_no + 1
        if self._want_blocks:
            # \n never occurs inside a UTF-8 sequence: decoding the lines joined is decoding
            # each (tests/unit/test_follower_chunks.py holds it to that).
            text = b"\n".join(pieces).decode("utf-8", errors="replace")
            if backlog:
                block = FollowedBlock(
                    first, len(pieces), text, LineOrigin.BACKLOG, self._origin.written_by
                )
            else:
                block = FollowedBlock(first, len(pieces), text)
            out.append(block)
        elif backlog:
            written_by = self._origin.written_by
            for number, piece in enumerate(pieces, first):
                text = piece.decode("utf-8", errors="replace")
                out.append(FollowedLine(number, text, LineOrigin.BACKLOG, written_by))
        else:
            for number, piece in enumerate(pieces, first):
                out.append(FollowedLine(number, piece.decode("utf-8", errors="replace")))
        self._line_no += len(pieces)
        self._partial.clear()
        self._partial += chunk[last + 1 :]
        self._line_start = base + last + 1
        return True

    def _emit(self, out: list[Followed], end: int) -> None:
        """``end``: the file offset where the line ends (its newline)."""
        text = self._partial.decode("utf-8", errors="replace").rstrip("\r")
        if self._overlong and len(self._partial) >= self._max_line:
            text += TRUNCATED_MARK
            BAD_INPUT.count(BadInput.LONG_LINE)
        self._line_no += 1
        if end < self._origin.backlog_until:
            line = FollowedLine(self._line_no, text, LineOrigin.BACKLOG, self._origin.written_by)
        else:
            line = FollowedLine(self._line_no, text)
        out.append(line)
        self._partial.clear()
        self._overlong = False

    def _flush_partial(self, out: list[Followed]) -> None:
        """A rotated file will get no more bytes: its unterminated last line is complete."""
        if self._partial:
            self._emit(out, self._pos)


def _line_end(chunk: bytes, start: int) -> int:
    """Index of the next \\n or \\r at or after ``start``; -1 when there is none."""
    newline = chunk.find(b"\n", start)
    carriage = chunk.find(b"\r", start, newline if newline >= 0 else len(chunk))
    return carriage if carriage >= 0 else newline
