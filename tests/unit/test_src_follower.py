"""LogFollower on real files: partial lines, rotation, truncation, missing file, bad bytes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from trainmedic.sources import follower as follower_module
from trainmedic.sources.follower import TRUNCATED_MARK, LogFollower


def texts(follower: LogFollower) -> list[str]:
    return [line.text for line in follower.poll()]


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def test_partial_line_is_held_until_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntw")
    follower = LogFollower(log)
    assert [(x.line_no, x.text) for x in follower.poll()] == [(1, "one")]
    assert texts(follower) == []
    append(log, b"o\r\nthree\n")
    assert [(x.line_no, x.text) for x in follower.poll()] == [(2, "two"), (3, "three")]
    assert texts(follower) == []


def test_rotation_by_rename_reads_old_tail_then_new_file(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"1\n")
    follower = LogFollower(log)
    assert texts(follower) == ["1"]
    append(log, b"2\nlast-without-newline")
    os.rename(log, tmp_path / "a.log.1")
    assert texts(follower) == ["2"], "path gone: the renamed file is still drained"
    log.write_bytes(b"new1\nnew2\n")
    got = follower.poll()
    assert [x.text for x in got] == ["last-without-newline", "new1", "new2"]
    assert [x.line_no for x in got[1:]] == [1, 2], "line numbers restart with the new file"
    assert follower.take_stale() is None


def test_truncation_reads_again_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"aaaa\nbbbb\n")
    follower = LogFollower(log)
    assert texts(follower) == ["aaaa", "bbbb"]
    log.write_bytes(b"c\n")  # truncate and write less than before
    assert [(x.line_no, x.text) for x in follower.poll()] == [(1, "c")]


def test_missing_file_is_stale_once_then_followed_when_it_appears(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    follower = LogFollower(log)
    assert texts(follower) == []
    stale = follower.take_stale()
    assert stale is not None and "later.log" in stale
    assert texts(follower) == [] and follower.take_stale() is None, "reported once"
    log.write_bytes(b"hello\n")
    assert texts(follower) == ["hello"] and not follower.missing
    log.unlink()
    follower.close()
    assert texts(follower) == [] and follower.take_stale() is not None, "a new disappearance"


def test_invalid_utf8_and_overlong_lines(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"bad \xff\xfe bytes\n" + b"x" * 5000 + b"\nnext\n")
    follower = LogFollower(log, max_line_bytes=100)
    bad, long, nxt = texts(follower)
    assert bad == "bad \ufffd\ufffd bytes"
    assert long == "x" * 100 + TRUNCATED_MARK
    assert nxt == "next"


def test_overlong_line_split_across_polls_stays_bounded(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    follower = LogFollower(log, max_line_bytes=10)
    log.write_bytes(b"")
    for _ in range(50):
        append(log, b"y" * 1000)
        assert texts(follower) == []
    append(log, b"\nok\n")
    assert texts(follower) == ["y" * 10 + TRUNCATED_MARK, "ok"]


def test_from_end_skips_existing_content_only(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_bytes(b"old 1\nold 2\n")
    follower = LogFollower(log, from_end=True)
    assert texts(follower) == []
    append(log, b"new\n")
    assert texts(follower) == ["new"]
    mid = tmp_path / "mid.log"
    mid.write_bytes(b"old\nhalf a li")
    follower = LogFollower(mid, from_end=True)
    assert texts(follower) == []
    append(mid, b"ne\nfresh\n")
    assert texts(follower) == ["fresh"], "the rest of a line begun before we started is dropped"


def test_large_backlog_is_read_over_several_polls(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(10000)))
    follower = LogFollower(log, max_read_bytes=20000)
    seen: list[str] = []
    for _ in range(10):
        seen += texts(follower)
    assert len(seen) == 10000 and seen[-1] == "line 9999"


def test_a_missing_file_that_appears_is_reported_recovered_once(tmp_path: Path) -> None:
    log = tmp_path / "late.log"
    follower = LogFollower(log)
    assert texts(follower) == [] and follower.take_stale() is not None
    assert not follower.take_recovered()
    log.write_bytes(b"up\n")
    assert texts(follower) == ["up"]
    assert follower.take_recovered() and not follower.take_recovered()
    # A file that was there from the start never was stale: nothing to recover from.
    other = tmp_path / "there.log"
    other.write_bytes(b"x\n")
    fresh = LogFollower(other)
    assert texts(fresh) == ["x"] and not fresh.take_recovered()


class _FailingFile:
    """A file handle whose reads fail as on a network file system that went away."""

    def read(self, size: int = -1) -> bytes:
        raise OSError(5, "Input/output error")

    def close(self) -> None:
        return None


def test_a_read_error_is_stale_then_resumes_where_it_stopped(tmp_path: Path) -> None:
    log = tmp_path / "nfs.log"
    log.write_bytes(b"one\ntwo\n")
    follower = LogFollower(log)
    assert texts(follower) == ["one", "two"]
    append(log, b"three\n")
    good = follower._file
    follower._file = _FailingFile()  # type: ignore[assignment]
    assert texts(follower) == [], "no exception reaches the service loop"
    stale = follower.take_stale()
    assert stale is not None and "Input/output error" in stale
    assert good is not None
    good.close()
    got = follower.poll()
    assert [(x.line_no, x.text) for x in got] == [(3, "three")], "not read again from the top"
    assert follower.take_recovered()


def test_a_deleted_file_is_released_once_read_to_its_end(tmp_path: Path) -> None:
    """A log deleted while followed (its job goes on, or cleaned it up) is read to its end,
    then closed: a deleted file is not held open, its disk space is given back."""
    log = tmp_path / "a.log"
    log.write_text("one\n")
    follower = LogFollower(log)
    assert [x.text for x in follower.poll()] == ["one"]
    with log.open("a") as f:
        f.write("two\nthree")
    log.unlink()
    assert [x.text for x in follower.poll()] == ["two", "three"]
    held = [os.readlink(fd) for fd in Path("/proc/self/fd").iterdir() if fd.is_symlink()]
    assert not any(p.startswith(str(log)) for p in held)
    assert follower.poll() == [] and follower.take_stale() is not None  # gone, said once
    log.write_text("four\n")
    assert [x.text for x in follower.poll()] == ["four"] and follower.take_recovered()


def test_a_bar_redrawn_with_carriage_returns_is_read_as_it_is_drawn(tmp_path: Path) -> None:
    """tqdm (HF Trainer, Lightning) in a file: ``\\r`` and no newline until the bar closes."""
    log = tmp_path / "job.err"
    log.write_bytes(b"  0%|          | 0/90 [00:00<?, ?it/s]\r  1%|          | 1/90 [00:00<")
    follower = LogFollower(log)
    assert texts(follower) == ["  0%|          | 0/90 [00:00<?, ?it/s]"]
    append(log, b"00:09, 9.1it/s]\r" + b" " * 40 + b"\r  2%|2         | 2/90 [00:00<00:09]\r")
    assert texts(follower) == [
        "  1%|          | 1/90 [00:00<00:09, 9.1it/s]",  # the blank redraw is left out
        "  2%|2         | 2/90 [00:00<00:09]",
    ]
    append(log, b"\nTraceback (most recent call last):\r\n  File x\n")  # \r then \n: one end
    assert [(x.line_no, x.text) for x in follower.poll()] == [
        (4, "Traceback (most recent call last):"),
        (5, "  File x"),
    ]


def test_crlf_split_between_two_reads_is_one_line_end(tmp_path: Path) -> None:
    log = tmp_path / "win.log"
    log.write_bytes(b"one\r")
    follower = LogFollower(log)
    assert texts(follower) == ["one"]
    append(log, b"\ntwo\r\n")
    assert [(x.line_no, x.text) for x in follower.poll()] == [(2, "two")]


class _CountingFile:
    """The follower's file, counting its reads."""

    def __init__(self, real: object) -> None:
        self.real, self.reads = real, 0

    def read(self, size: int) -> bytes:
        self.reads += 1
        return self.real.read(size)  # type: ignore[attr-defined, no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def test_a_poll_that_reaches_the_end_reads_once(tmp_path: Path) -> None:
    """A read that stops short is the end of the file: no second read to be told so (one
    read per followed file per poll, thousands of files every cycle)."""
    log = tmp_path / "a.log"
    log.write_text("one\n")
    follower = LogFollower(log)
    assert texts(follower) == ["one"]
    counting = _CountingFile(follower._file)
    follower._file = counting  # type: ignore[assignment]
    append(log, b"two\nthr")
    assert texts(follower) == ["two"]
    append(log, b"ee\n")
    assert texts(follower) == ["three"]
    assert counting.reads == 2
    follower.close()


class _ReadSizes:
    """A followed file that records the size of each ``read`` asked of it."""

    def __init__(self, handle: BinaryIO, sizes: list[int]) -> None:
        self._handle, self._sizes = handle, sizes

    def read(self, size: int = -1) -> bytes:
        self._sizes.append(size)
        return self._handle.read(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def test_poll_reads_only_the_bytes_its_stat_showed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poll of a few new lines asks for those bytes, in one read: not a read sized for a
    backlog (megabytes, the cost of a poll of a thousand files), nor an empty read after."""
    sizes: list[int] = []
    opened = follower_module.open_regular
    monkeypatch.setattr(
        follower_module, "open_regular", lambda path: _ReadSizes(opened(path), sizes)
    )
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\n")
    follower = LogFollower(log)
    assert texts(follower) == ["one", "two"]
    assert sizes == [8]
    append(log, b"three\n")
    assert texts(follower) == ["three"]
    assert sizes == [8, 6]
    assert texts(follower) == [] and sizes == [8, 6], "nothing new: no read at all"
