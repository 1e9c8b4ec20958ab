"""A log file's lines for ``analyze``, cut where the live service's follower cuts them.

The service reads a job's logs with ``sources.follower.LogFollower``: a line ends at ``\\n``
or at a lone ``\\r`` (``\\r\\n`` is one line end), so each state a progress bar draws in
place (tqdm, Lightning, the HF Trainer: ``\\r`` and no newline until the bar closes) is a
line; a blank segment ended by a lone ``\\r`` (a bar erased before its redraw) is none; a line
is kept to ``max_bytes`` and the rest of it dropped (marked ``TRUNCATED_MARK``, as the
follower marks it). ``analyze`` used to cut at ``\\n`` only:
a bar's file is then one line of megabytes, cut at 64 KiB, and what another rank printed at
its end (an Xid line glued to the last redraw, a traceback's first line) was dropped offline
and read live, so the two verdicts differed. Both now see the same lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

BLOCK_BYTES = 1 << 20
TRUNCATED_MARK = b" [...truncated]"  # the follower's (a unit test ties the two)


def read_lines(handle: IO[bytes], max_bytes: int) -> Iterator[bytes]:
    """The lines of ``handle`` (without their ends), as the follower emits them from a file
    it reads in one go."""
    partial = bytearray()
    overlong = False  # the current line has reached max_bytes: the rest of it is dropped
    after_cr = False  # the previous block ended with \r: \r\n or a redraw, its next byte says
    while block := handle.read(BLOCK_BYTES):
        start, size = 0, len(block)
        if after_cr:
            after_cr = False
            crlf = block[0] == 0x0A
            if crlf or partial.strip():
                yield _line(partial, overlong, max_bytes)
            partial.clear()
            overlong = False
            start = 1 if crlf else 0
        if b"\r" not in block:  # the common block, no bar in it: its lines by one split
            pieces = block[start:].split(b"\n")
            rest = pieces.pop()
            for index, piece in enumerate(pieces):
                if index == 0 and (partial or overlong):
                    partial, overlong = _extend(partial, overlong, piece, max_bytes)
                    yield _line(partial, overlong, max_bytes)
                    partial, overlong = bytearray(), False
                else:
                    yield piece if len(piece) <= max_bytes else piece[:max_bytes] + TRUNCATED_MARK
            partial, overlong = _extend(partial, overlong, rest, max_bytes)
            continue
        while start < size:
            newline = block.find(b"\n", start)
            carriage = block.find(b"\r", start, newline if newline >= 0 else size)
            end = carriage if carriage >= 0 else newline
            piece = block[start:] if end < 0 else block[start:end]
            partial, overlong = _extend(partial, overlong, piece, max_bytes)
            if end < 0:
                break
            after = end + 1
            redraw = block[end] == 0x0D
            if redraw and after == size:
                after_cr = True  # decided by the next block's first byte
                break
            if redraw and block[after] == 0x0A:
                after, redraw = after + 1, False
            if not (redraw and not partial.strip()):
                yield _line(partial, overlong, max_bytes)
            partial.clear()
            overlong = False
            start = after
    if partial.strip() or (partial and not after_cr):
        yield _line(partial, overlong, max_bytes)  # the last line, without a newline


def _extend(
    partial: bytearray, overlong: bool, piece: bytes, max_bytes: int
) -> tuple[bytearray, bool]:
    """``partial`` with ``piece`` added, up to ``max_bytes``; whether the line is cut."""
    if not overlong:
        room = max_bytes - len(partial)
        partial += piece[:room]
        overlong = len(piece) > room
    return partial, overlong


def _line(partial: bytearray, overlong: bool, max_bytes: int) -> bytes:
    if overlong and len(partial) >= max_bytes:
        return bytes(partial) + TRUNCATED_MARK
    return bytes(partial)
