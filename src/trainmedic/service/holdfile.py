"""The watchdog's own record of holds: a small JSON file beside the database.

The store records every hold, but a watchdog that can only read the store does not fail open
when the database is gone (a deleted SQLite file, PostgreSQL down): the jobs held when it
went stay held. So the executor writes each hold here as well, before it holds the job, and
removes it once the job is released; the watchdog releases what either record holds.

One JSON object ``{job_id: {"held_at": t, "by": executor}}``, replaced atomically (a
temporary file renamed over it) under an exclusive ``flock`` on ``<file>.lock``: the service
and a watchdog process update it concurrently. An unreadable file counts as empty (and is
replaced at the next write), so a damaged file never stops the service.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

HOLDS_FILE_NAME = "holds.json"


@dataclass(frozen=True, slots=True)
class FileHold:
    job_id: str
    held_at: float
    by: str


class HoldFile:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    def add(self, job_id: str, *, held_at: float, by: str) -> None:
        """Note a hold (an open one for the job is kept as it is, like the store's)."""

        def _add(holds: dict[str, Any]) -> None:
            holds.setdefault(job_id, {"held_at": held_at, "by": by})

        self._update(_add)

    def remove(self, job_id: str) -> None:
        self._update(lambda holds: holds.pop(job_id, None))

    def holds(self) -> list[FileHold]:
        with self._locked():
            data = self._read()
        return [
            FileHold(job_id, float(entry["held_at"]), str(entry.get("by", "")))
            for job_id, entry in sorted(data.items())
        ]

    # -- internals -----------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("hold file %s unreadable (%s): taken as empty", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            str(k): v
            for k, v in data.items()
            if isinstance(v, dict) and isinstance(v.get("held_at"), int | float)
        }

    def _update(self, change: Callable[[dict[str, Any]], object]) -> None:
        with self._locked():
            data = self._read()
            change(data)
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "w") as handle:
                json.dump(data, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)


def hold_file_in(state_dir: str) -> HoldFile | None:
    """The hold file of a service whose state lives in ``state_dir`` (none without one)."""
    return HoldFile(Path(state_dir) / HOLDS_FILE_NAME) if state_dir else None
