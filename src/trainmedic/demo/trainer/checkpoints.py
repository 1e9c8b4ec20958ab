"""Atomic checkpoints for the example trainer: ``<run_dir>/checkpoints/ckpt_00000120.pt``.

A checkpoint is written to a temporary file in the same directory, fsynced, renamed over its
final name with ``os.replace`` and the directory fsynced, so a reader (the resuming trainer, the
service's checkpoint watcher) never sees a torn file. Only the newest ``keep`` are kept.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

_NAME = re.compile(r"^ckpt_(\d{8})\.pt$")


def checkpoint_path(directory: Path, iteration: int) -> Path:
    return directory / f"ckpt_{iteration:08d}.pt"


def list_checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """(iteration, path) of every complete checkpoint, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), directory / n) for n in names if (m := _NAME.match(n))]
    return sorted(found)


def newest_checkpoint(directory: Path) -> tuple[int, Path] | None:
    found = list_checkpoints(directory)
    return found[-1] if found else None


def save_atomic(
    directory: Path, iteration: int, state: dict[str, Any], keep: int = 3, delay_s: float = 0.0
) -> Path:
    """Write ``state`` as the checkpoint of ``iteration``; ``delay_s`` emulates slow storage."""
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(directory, iteration)
    temp = directory / f".{final.name}.tmp.{os.getpid()}"
    with open(temp, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        if delay_s > 0:
            time.sleep(delay_s)
        os.fsync(handle.fileno())
    os.replace(temp, final)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    for _iteration, old in list_checkpoints(directory)[:-keep]:
        old.unlink(missing_ok=True)
    return final


def load(path: Path) -> dict[str, Any]:
    import torch

    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    return state
