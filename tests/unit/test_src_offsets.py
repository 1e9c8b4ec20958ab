"""Follower offsets on real files and a real SQLite store: a restart resumes where the last
run left each file, a replaced or reused-inode file is not mistaken for it, a never-seen file
is read back within the look-back window only; year-less stamps get the nearest past year."""

from __future__ import annotations

import calendar
import dataclasses
import os
import time
from pathlib import Path

from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.sources.follower import LogFollower
from trainmedic.sources.kernel import KernelLogSource
from trainmedic.sources.lines import followed_time
from trainmedic.sources.offsets import FilePosition, LineOrigin, OffsetBook
from trainmedic.store import Store, sqlite_url


def _restart(book: OffsetBook, store: Store, lookback_s: float = 600.0) -> OffsetBook:
    """What the service does: store what is due, then a new run loads it back."""
    due = book.due()
    store.save_follower_offsets(due)
    book.saved(due)
    stored = [FilePosition(**dataclasses.asdict(o)) for o in store.follower_offsets()]
    return OffsetBook(stored, lookback_s=lookback_s)


def _texts(follower: LogFollower) -> list[tuple[int, str]]:
    return [(line.line_no, line.text) for line in follower.poll()]


def test_a_restart_resumes_each_file_where_the_last_run_left_it(tmp_path: Path) -> None:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    log = tmp_path / "job.out"
    log.write_bytes(b"one\ntwo\nhalf")
    book = OffsetBook()
    assert _texts(LogFollower(log, book=book)) == [(1, "one"), (2, "two")]
    with log.open("ab") as f:
        f.write(b" a line\nthree\n")
    follower = LogFollower(log, book=_restart(book, store))
    assert _texts(follower) == [(3, "half a line"), (4, "three")]
    assert [line.origin for line in follower.poll()] == []


def test_a_file_replaced_while_away_is_not_resumed(tmp_path: Path) -> None:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    log = tmp_path / "kern.log"
    log.write_bytes(b"a\nb\n")
    book = OffsetBook()
    assert len(LogFollower(log, book=book).poll()) == 2
    nxt = _restart(book, store)
    os.rename(log, tmp_path / "kern.log.1")  # rotated while the service was down
    log.write_bytes(b"c\n")
    lines = LogFollower(log, book=nxt).poll()
    assert [(x.text, x.origin) for x in lines] == [("c", LineOrigin.BACKLOG)]


def test_a_reused_inode_with_other_content_is_not_resumed(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"a new file with the same inode\nsecond\n")
    st = os.stat(log)
    stale = FilePosition(str(log), st.st_dev, st.st_ino, 3, "0" * 64, 31, 1, 0.0)
    lines = LogFollower(log, book=OffsetBook([stale])).poll()
    assert [x.line_no for x in lines] == [1, 2], "read from its start, not from byte 31"


def test_a_never_seen_file_is_read_back_only_within_the_window(tmp_path: Path) -> None:
    old = tmp_path / "old.log"
    old.write_bytes(b"last week\nhalf a li")
    week_ago = time.time() - 7 * 86400
    os.utime(old, (week_ago, week_ago))
    follower = LogFollower(old, book=OffsetBook(lookback_s=600))
    assert follower.poll() == []
    with old.open("ab") as f:
        f.write(b"ne\nnew\n")
    assert [(x.text, x.origin) for x in follower.poll()] == [("new", LineOrigin.LIVE)]

    fresh = tmp_path / "fresh.log"
    fresh.write_bytes(b"before we looked\n")
    follower = LogFollower(fresh, book=OffsetBook(lookback_s=600))
    (line,) = follower.poll()
    assert line.origin is LineOrigin.BACKLOG
    assert line.written_by == os.stat(fresh).st_mtime

    later = tmp_path / "later.log"  # absent at the first look: created while followed
    follower = LogFollower(later, book=OffsetBook(lookback_s=600))
    assert follower.poll() == []
    later.write_bytes(b"news\n")
    assert [x.origin for x in follower.poll()] == [LineOrigin.LIVE]


def test_backlog_lines_are_evidence_only_when_dated_inside_the_window(tmp_path: Path) -> None:
    now = time.time()
    kern = tmp_path / "kern.log"
    stamp = lambda t: time.strftime("%b %e %H:%M:%S", time.localtime(t))  # noqa: E731
    kern.write_text(
        f"{stamp(now - 3600)} node2 kernel: an hour ago\n"
        f"{stamp(now - 60)} node2 kernel: a minute ago\n"
        "[74889.542031] undated\n"
    )
    source = KernelLogSource("node2", kern, book=OffsetBook(lookback_s=600))
    (line,) = source.poll()
    assert line.text.endswith("a minute ago")  # type: ignore[attr-defined]
    assert abs(line.time - int(now - 60)) < 1.0


def test_a_backlog_line_is_never_dated_after_its_file_was_written() -> None:
    from trainmedic.sources.follower import FollowedLine

    line = FollowedLine(1, "x", LineOrigin.BACKLOG, written_by=100.0)
    assert followed_time(line, 150.0, 200.0, 0.0, undated_backlog=False) == 100.0
    assert followed_time(line, None, 200.0, 0.0, undated_backlog=True) == 100.0
    assert followed_time(line, None, 200.0, 0.0, undated_backlog=False) is None
    assert followed_time(line, 50.0, 200.0, 60.0, undated_backlog=True) is None


def _utc(*ymdhms: int) -> float:
    return float(calendar.timegm((*ymdhms, 0, 0, 0)))


def test_year_less_stamps_get_the_year_nearest_now_never_ahead() -> None:
    jan2 = _utc(2027, 1, 2, 0, 0, 0)

    def year(line: str, now: float) -> int:
        stamp = parse_prefix(line, now=now).timestamp
        assert stamp is not None
        return time.gmtime(stamp).tm_year

    assert year("Dec 31 23:00:00 n1 kernel: x", jan2) == 2026
    assert year("Jan  1 23:00:00 n1 kernel: x", jan2) == 2027
    assert year("Mar  7 04:58:42 n1 kernel: x", jan2) == 2026, "not two months ahead"
    assert year("Feb 29 10:00:00 n1 kernel: x", jan2) == 2024, "the last Feb 29 there was"
    assert year("[E1231 23:59:59.5 x.cpp:1] glog", jan2) == 2026
    assert year("Mar  7 04:58:42 n1 kernel: x", _utc(2026, 6, 1, 0, 0, 0)) == 2026
    # Without now, analyze's behaviour is unchanged: the year given.
    assert time.gmtime(parse_prefix("Mar  7 04:58:42 n1 kernel: x").timestamp or 0).tm_year == (
        2024
    )


def test_a_live_line_stamped_hours_off_is_timed_when_read(tmp_path: Path) -> None:
    """Python's logging writes local time without a zone: read as UTC on a UTC-5 cluster, a
    line just written looks five hours old, and would seem to predate its own attempt."""
    from trainmedic.sources.joblog import JobLogSource

    log = tmp_path / "job.out"
    log.write_text("")
    now = time.time()
    source = JobLogSource("7", [log], clock=lambda: now, book=OffsetBook())
    assert source.poll() == []
    local = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now - 5 * 3600))
    log.write_text(f"{local},954 - ERROR - RuntimeError: boom\n{_iso_z(now - 2)} ok\n")
    skewed, recent = source.poll()
    assert skewed.time == now and abs(recent.time - (now - 2)) < 0.01


def _iso_z(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"
