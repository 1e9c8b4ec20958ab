"""Shared helpers for line-based sources: time of a line, a directory scanner, and opening
a file only when it is a regular file."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

Clock = Callable[[], float]

MAX_LINE_AGE_S = 86400.0
"""A line's own timestamp is trusted only within a day of now (and not in the future):
syslog stamps carry no year and a skewed clock should not move events by hours."""


def line_time(stamp: float | None, now: float) -> float:
    """The time of a line: its own stamp when plausible, else the time it was read."""
    if stamp is None or stamp > now + 1.0 or stamp < now - MAX_LINE_AGE_S:
        return now
    return stamp


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
