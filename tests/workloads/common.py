"""What every framework workload shares: its run directory, fault hook and test trace.

The workloads are ordinary training scripts of "another author": they import torch and their
framework, never trainmedic, and log only the way their framework logs by default. Two files
in the run directory are for the tests alone (the service never reads them):

* ``faults.json``, written by a test: a JSON list of faults, polled at every training step;
* ``trace.jsonl``, appended by global rank 0 (and by a rank when it fires a fault): when each
  attempt started, resumed, stepped, saved and failed, so a test measures detection latency
  and time to productive again without parsing four log formats.

Faults (``type``; ``rank`` is the global rank that fires it, default 0; ``node`` instead
picks local rank 0 of that node):

* ``kill``: SIGKILL itself (once, in the first attempt that sees it);
* ``hang``: sleep forever inside a training step (once);
* ``error``: raise ``RuntimeError`` at global step ``at_iter``, in every attempt that gets
  there (a deterministic application bug);
* ``xid_stdout``: print an NVIDIA Xid 79 line to the job's stdout, then SIGKILL itself
  (once): a forged hardware line that must drain nothing.

A node's Xid in its kernel log is written by the test itself, never by the job.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

XID_LINE = "NVRM: Xid (PCI:0000:3b:00): 79, pid={pid}, GPU has fallen off the bus."


def run_dir() -> Path:
    return Path(os.environ.get("WORKLOAD_RUN_DIR", os.getcwd()))


def attempt() -> int:
    """Slurm's restart count: unset on the first run, then 1, 2, ..."""
    return int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)


def node() -> str:
    return os.environ.get("SLURMD_NODENAME", socket.gethostname())


def global_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def step_sleep() -> float:
    """Seconds each step sleeps: keeps 4 ranks on 2 shared cores calm and sets the cadence."""
    return float(os.environ.get("WORKLOAD_STEP_SLEEP", "0.05"))


def write_line(text: str, stream: int = 1) -> None:
    """One ``os.write`` per line: ranks sharing a file never splice each other's lines."""
    os.write(stream, (text + "\n").encode())


def trace(event: str, **fields: Any) -> None:
    """Append one event to ``trace.jsonl`` (atomic for lines this short: O_APPEND)."""
    record = {"t": time.time(), "event": event, "attempt": attempt(), "rank": global_rank()}
    record.update(node=node(), **fields)
    fd = os.open(run_dir() / "trace.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class FaultHook:
    """Call ``at_step(global_step)`` at the start of every training step on every rank."""

    def __init__(self) -> None:
        self._control = run_dir() / "faults.json"
        self._fired = run_dir() / "faults.fired"
        self._key: tuple[int, int] | None = None
        self._faults: list[dict[str, Any]] = []

    def at_step(self, step: int) -> None:
        for fault in self._refresh():
            if self._mine(fault):
                self._fire(fault, step)

    def _refresh(self) -> list[dict[str, Any]]:
        try:
            st = os.stat(self._control)
        except FileNotFoundError:
            return []
        key = (st.st_mtime_ns, st.st_size)
        if key != self._key:
            self._key = key
            try:
                loaded = json.loads(self._control.read_text())
            except (OSError, ValueError):
                return self._faults  # caught mid-replace: the next step reads it whole
            self._faults = [f for f in loaded if isinstance(f, dict)]
        return self._faults

    def _mine(self, fault: dict[str, Any]) -> bool:
        if "node" in fault:
            return bool(fault["node"] == node() and local_rank() == 0)
        return int(fault.get("rank", 0)) == global_rank()

    def _claim(self, fault: dict[str, Any]) -> bool:
        """A one-shot fault fires once over all attempts (the marker file says it did)."""
        self._fired.mkdir(exist_ok=True)
        try:
            os.close(os.open(self._fired / str(fault["id"]), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True

    def _fire(self, fault: dict[str, Any], step: int) -> None:
        kind = fault.get("type")
        if kind == "error":
            if step == int(fault["at_iter"]):
                trace("fault", type=kind, iter=step)
                raise RuntimeError(
                    f"shape mismatch in the loss head at step {step}: expected [8, 1], got [8, 2]"
                )
            return
        if not self._claim(fault):
            return
        trace("fault", type=kind, iter=step)
        if kind == "hang":
            while True:  # a rank stuck in a step: a dead-locked collective, a stuck loader
                time.sleep(3600)
        if kind == "xid_stdout":
            write_line(XID_LINE.format(pid=os.getpid()))
        if kind in ("kill", "xid_stdout"):
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
