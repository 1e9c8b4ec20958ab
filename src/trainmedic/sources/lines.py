"""Shared helpers for line-based sources: time of a line, the zone of printed stamps, a
directory scanner, and opening a file only when it is a regular file."""

from __future__ import annotations

import calendar
import errno
import os
import stat
import time
import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from trainmedic.sources.offsets import LineOrigin

if TYPE_CHECKING:  # follower imports this module (open_regular)
    from trainmedic.sources.follower import FollowedLine

Clock = Callable[[], float]

MAX_LINE_AGE_S = 300.0
"""A line read as it is written keeps its own stamp only within this of the read (and not in
the future): the stamp orders a burst of lines, but a clock or a zone that is off by hours
(Python's logging writes local time without a zone) must not move the line before the
attempt that wrote it."""


def line_time(stamp: float | None, now: float) -> float:
    """The time of a line read as it was written: its own stamp when plausible, else the
    time it was read."""
    if stamp is None or stamp > now + 1.0 or stamp < now - MAX_LINE_AGE_S:
        return now
    return stamp


class LocalZone(tzinfo):
    """The zone of this machine as ``time.localtime`` sees it (``TZ``, else /etc/localtime),
    daylight saving included: what Python logging's ``asctime`` and syslog print in."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        if dt is None:
            return timedelta(seconds=-time.timezone)
        wall = dt.replace(tzinfo=None).timetuple()
        # mktime reads the wall clock in the local zone (is_dst -1: let it decide).
        local = time.mktime((*wall[:8], -1))
        return timedelta(seconds=calendar.timegm(wall) - local)

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str:
        return "local"


def resolve_timezone(name: str) -> tzinfo:
    """``[detect] log_timezone``: "local" (this machine's zone), "UTC", or an IANA zone
    name. Raises ValueError naming the key for an unknown zone."""
    if name in ("", "local"):
        return LocalZone()
    if name.upper() in ("UTC", "Z"):
        return UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(
            f'detect.log_timezone {name!r} is not a known zone (use "local", "UTC" or an '
            f'IANA name such as "Europe/Paris"): {error}'
        ) from None


def followed_time(
    line: FollowedLine,
    stamp: float | None,
    now: float,
    window_start: float,
    *,
    undated_backlog: bool,
) -> float | None:
    """The time of a followed line, or None when it is history, not news.

    A LIVE line is timed by ``line_time``. A BACKLOG line (in a never-seen file before the
    service followed it) is never dated later than the file's mtime, and never "now": it must
    carry a stamp inside the look-back window (``window_start`` on), unless
    ``undated_backlog`` lets an undated one through at the mtime (a job's own log, where
    attempt banners place lines).
    """
    if line.origin is LineOrigin.LIVE or line.written_by is None:
        return line_time(stamp, now)
    bound = min(line.written_by, now)
    if stamp is None:
        return bound if undated_backlog else None
    if stamp < window_start:
        return None
    return min(stamp, bound)


class NotRegularFile(OSError):
    """A path that is a FIFO, a device, a socket, a directory or a symbolic link: never read
    as a log or a checkpoint marker (a FIFO blocks the reader, /dev/zero never ends)."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{kind}, not a regular file", path)
        self.kind = kind


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "an unknown file type")


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` for reading if, and only if, it is a regular file.

    ``O_NOFOLLOW`` refuses a symbolic link as the last component; ``O_NONBLOCK`` makes
    opening a FIFO return at once instead of waiting for a writer; ``fstat`` on the open
    descriptor (not a ``stat`` before it, which a swap would fool) checks the type. Raises
    NotRegularFile for anything else, or the OSError of the open itself."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise NotRegularFile(str(path), "a symbolic link (not followed)") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(str(path), _kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class DirectoryScan:
    """Files in a directory whose names end with one of ``suffixes``, rescanned only when the
    directory's mtime changes (a new or renamed file changes it)."""

    def __init__(self, directory: str | os.PathLike[str], suffixes: tuple[str, ...]) -> None:
        self.directory = Path(directory)
        self.suffixes = suffixes
        self._mtime_ns: int | None = None
        self._known: set[str] = set()

    def new_files(self) -> list[Path]:
        """Files not returned before; empty when the directory is missing or unchanged."""
        try:
            mtime = os.stat(self.directory).st_mtime_ns
        except OSError:
            return []
        if mtime == self._mtime_ns:
            return []
        self._mtime_ns = mtime
        try:
            names = sorted(
                entry.name
                for entry in os.scandir(self.directory)
                if entry.name.endswith(self.suffixes) and entry.is_file(follow_symlinks=False)
            )
        except OSError:
            return []
        fresh = [n for n in names if n not in self._known]
        self._known.update(fresh)
        return [self.directory / n for n in fresh]
