"""The newest checkpoint in a directory: its iteration and when it was written.

Names understood (the iteration is the number): trainmedic's ``ckpt_00000120.pt``, Megatron
``iter_0000120``, HF ``checkpoint-500``, DeepSpeed ``global_step500``, Lightning
``epoch=0-step=500.ckpt``. A sidecar, when present, is authoritative because frameworks write
it only after the checkpoint is complete: Megatron's ``latest_checkpointed_iteration.txt``
(a number) or DeepSpeed's ``latest`` (a tag such as ``global_step500``). Temporary files
(``*.tmp``, dot files, ``tmp*``) are never taken for a checkpoint.

``poll`` returns a ``CheckpointSaved`` each time the newest checkpoint changes; it rescans
only when the directory's (or the sidecar's) mtime changes.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from trainmedic.core.badinput import BAD_INPUT, BadInput, small_int
from trainmedic.core.observations import (
    CheckpointSaved,
    Observation,
    SourceRecovered,
    SourceStale,
)
from trainmedic.sources.lines import Clock, NotRegularFile, open_regular

_NAMES = (
    re.compile(r"^ckpt[_-]?(\d+)(?:\.\w+)?$"),
    re.compile(r"^iter_(\d+)$"),
    re.compile(r"^checkpoint-(\d+)$"),
    re.compile(r"^global_step(\d+)$"),
    re.compile(r"(?:^|[-_])step=(\d+)(?:-[^/]*)?\.ckpt$"),
)
SIDECARS = ("latest_checkpointed_iteration.txt", "latest")
_SIDECAR_VALUE = re.compile(r"^\s*(?:global_step|iter_)?(\d+)\s*$")
SIDECAR_MAX_BYTES = 200
"""Bytes of a sidecar that are read: it holds one number or tag. A sidecar that is not a
regular file (a link to /dev/zero, a FIFO) is not read at all."""


def checkpoint_iteration(name: str) -> int | None:
    """The iteration a checkpoint file or directory name carries, or None."""
    if name.startswith((".", "tmp")) or name.endswith((".tmp", ".partial")):
        return None
    for pattern in _NAMES:
        m = pattern.search(name)
        if m:
            return small_int(m.group(1))
    return None


class CheckpointWatcher:
    def __init__(
        self, job_id: str, directory: str | os.PathLike[str], *, clock: Clock = time.time
    ) -> None:
        self.job_id = job_id
        self.directory = Path(directory)
        self._clock = clock
        self._stamp: tuple[int, ...] | None = None
        self._last: tuple[int, str, float] | None = None
        self._stale_reported = False

    def newest(self) -> tuple[int, Path, float] | None:
        """(iteration, path, mtime) of the newest complete checkpoint, or None."""
        for sidecar in SIDECARS:
            found = self._from_sidecar(self.directory / sidecar)
            if found is not None:
                return found
        best: tuple[int, Path, float] | None = None
        for entry in os.scandir(self.directory):
            iteration = checkpoint_iteration(entry.name)
            if iteration is not None and (best is None or iteration > best[0]):
                try:
                    mtime = entry.stat().st_mtime
                except FileNotFoundError:
                    continue  # rotated away (old checkpoints are pruned) since the listing
                best = (iteration, Path(entry.path), mtime)
        return best

    def poll(self) -> list[Observation]:
        now = self._clock()
        out: list[Observation] = []
        try:
            stamp = self._mtimes()
            newest = None if stamp == self._stamp else self.newest()
        except OSError as exc:
            if self._stale_reported:
                return []
            self._stale_reported = True
            return [SourceStale(now, f"checkpoints:{self.directory}", str(exc), job_id=self.job_id)]
        if self._stale_reported:
            self._stale_reported = False
            out.append(SourceRecovered(now, f"checkpoints:{self.directory}", job_id=self.job_id))
        if stamp == self._stamp:
            return out
        self._stamp = stamp
        if newest is None:
            return out
        iteration, path, mtime = newest
        key = (iteration, str(path), mtime)
        if key == self._last:
            return out
        self._last = key
        out.append(
            CheckpointSaved(
                time=mtime, job_id=self.job_id, iteration=iteration, path=str(path), received=now
            )
        )
        return out

    def _mtimes(self) -> tuple[int, ...]:
        stamps = [os.stat(self.directory).st_mtime_ns]
        for sidecar in SIDECARS:
            try:
                stamps.append(os.stat(self.directory / sidecar).st_mtime_ns)
            except FileNotFoundError:
                stamps.append(0)
        return tuple(stamps)

    def _from_sidecar(self, path: Path) -> tuple[int, Path, float] | None:
        try:
            with open_regular(path) as handle:
                raw = handle.read(SIDECAR_MAX_BYTES + 1)
                mtime = os.fstat(handle.fileno()).st_mtime
        except FileNotFoundError:
            return None
        except NotRegularFile as exc:
            if exc.kind != "a directory":  # a directory named "latest" is no marker at all
                BAD_INPUT.count(BadInput.CHECKPOINT_MARKER)
            return None
        if len(raw) > SIDECAR_MAX_BYTES:
            BAD_INPUT.count(BadInput.CHECKPOINT_MARKER)
            return None
        m = _SIDECAR_VALUE.match(raw.decode("utf-8", errors="replace"))
        iteration = small_int(m.group(1)) if m is not None else None
        if iteration is None:
            return None
        for name in (f"iter_{iteration:07d}", f"global_step{iteration}"):
            target = self.directory / name
            if target.exists():
                return iteration, target, target.stat().st_mtime
        return iteration, path, mtime
