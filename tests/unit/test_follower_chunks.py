"""The follower's chunk fast path (``LogFollower._split_plain``: ``bytes.split`` for chunks of
``\\n``-ended lines) reads exactly what the byte-by-byte split reads: the same lines, numbers,
origins (backlog or new) and resume offsets, whatever the bytes and wherever a write or a
read cuts them (carriage returns, ``\\r\\n`` split across reads, invalid UTF-8, lines over the
cap, a backlog that ends inside a chunk)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmedic.sources.follower import FollowedBlock, FollowedLine, LogFollower
from trainmedic.sources.offsets import OffsetBook

_PIECES = [
    "é".encode(),
    b"\xe2\x82\xac",
    b"\xf0\x9f",
    b"\xc3",
    b"a",
    b"iter=12 loss=0.5",
    b"\n",
    b"\n",
    b"\n",
    b"\r",
    b"\r\n",
    b"\xe2\x82",
    b"\xff",
    b"x" * 40,
]


def _read(
    path: Path, writes: list[bytes], *, fast: bool, backlog: bytes, blocks: bool = False
) -> list[Any]:
    path.write_bytes(backlog)
    book = OffsetBook([], lookback_s=3600.0, clock=time.time)
    follower = LogFollower(path, max_line_bytes=24, max_read_bytes=50, book=book)
    if not fast:
        follower._split_plain = lambda *args: False  # type: ignore[method-assign]
    seen: list[Any] = []
    for data in [b"", *writes, b"", b""]:
        with path.open("ab") as f:
            f.write(data)
        got = follower.poll_blocks() if blocks else follower.poll()
        read = [y for x in got for y in (x.lines() if isinstance(x, FollowedBlock) else [x])]
        lines = [  # written_by: the file's mtime, which the two files do not share
            (x.line_no, x.text, x.origin, x.written_by is None) for x in read
        ]
        seen.append((lines, follower._resume_at()))
    follower.close()
    return seen


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    backlog=st.lists(st.sampled_from(_PIECES), max_size=12).map(b"".join),
    writes=st.lists(st.lists(st.sampled_from(_PIECES), max_size=30).map(b"".join), max_size=8),
)
def test_the_chunk_fast_path_reads_what_the_byte_split_reads(
    tmp_path_factory: Any, backlog: bytes, writes: list[bytes]
) -> None:
    tmp = tmp_path_factory.mktemp("chunks")
    fast = _read(tmp / "a.log", writes, fast=True, backlog=backlog)
    slow = _read(tmp / "b.log", writes, fast=False, backlog=backlog)
    assert fast == slow
    assert _read(tmp / "c.log", writes, fast=True, backlog=backlog, blocks=True) == slow


def test_plain_lines_take_the_fast_path(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b"")
    follower = LogFollower(path)
    follower.poll()
    path.write_bytes(b"one\ntwo\n\nthree")
    calls: list[bool] = []
    split_plain = follower._split_plain

    def spy(chunk: bytes, base: int, out: list[FollowedLine]) -> bool:
        calls.append(split_plain(chunk, base, out))
        return calls[-1]

    follower._split_plain = spy  # type: ignore[method-assign]
    assert [line.text for line in follower.poll()] == ["one", "two", ""]
    assert calls == [True]
    with path.open("ab") as f:
        f.write(b" more\n")
    assert [(line.line_no, line.text) for line in follower.poll()] == [(4, "three more")]
