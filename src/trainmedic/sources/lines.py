"""Shared helpers for line-based sources: time of a line, a directory scanner."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

Clock = Callable[[], float]

MAX_LINE_AGE_S = 86400.0
"""A line's own timestamp is trusted only within a day of now (and not in the future):
syslog stamps carry no year and a skewed clock should not move events by hours."""


def line_time(stamp: float | None, now: float) -> float:
    """The time of a line: its own stamp when plausible, else the time it was read."""
    if stamp is None or stamp > now + 1.0 or stamp < now - MAX_LINE_AGE_S:
        return now
    return stamp


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
                if entry.name.endswith(self.suffixes) and entry.is_file()
            )
        except OSError:
            return []
        fresh = [n for n in names if n not in self._known]
        self._known.update(fresh)
        return [self.directory / n for n in fresh]
