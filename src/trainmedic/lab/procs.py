"""Process bookkeeping for the lab cluster: free ports, zombie-aware liveness, and the job
processes a slurmd leaves behind (slurmstepd daemonizes, so they are not its children)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterable
from pathlib import Path


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` distinct TCP ports free right now on loopback (held open until all are chosen,
    so they differ from each other; another process may still take one before we bind it)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return tuple(s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    return raw[raw.rfind(")") + 2 :].split()


def is_running(pid: int) -> bool:
    """True while the process exists and is not a zombie (``kill -0`` succeeds on zombies)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: with the pid, an identity that
    survives pid reuse (a recorded pid is only ours while this matches)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def parent_of(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(roots: Iterable[int]) -> set[int]:
    """Every live process below ``roots`` (roots excluded)."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        ppid = parent_of(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _socket_inodes_under(directory: Path) -> set[str]:
    prefix = str(directory).rstrip("/") + "/"
    inodes: set[str] = set()
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return inodes
    for line in lines:
        parts = line.split()
        if len(parts) >= 8 and parts[7].startswith(prefix):
            inodes.add(parts[6])
    return inodes


def step_daemon_pids(spool_root: Path) -> set[int]:
    """The slurmstepd processes serving steps of this cluster, found through the step sockets
    they listen on under the spool directory (the only link from a node to its jobs once
    slurmd is gone)."""
    inodes = _socket_inodes_under(spool_root)
    if not inodes:
        return set()
    wanted = {f"socket:[{i}]" for i in inodes}
    pids: set[int] = set()
    for pid in all_pids():
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            for fd in os.listdir(fd_dir):
                with contextlib.suppress(OSError):
                    if os.readlink(fd_dir / fd) in wanted:
                        pids.add(pid)
                        break
        except OSError:
            continue
    return pids


def signal_pids(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_gone(pids: Iterable[int], timeout: float) -> set[int]:
    """Wait until none of ``pids`` runs (zombies count as gone); returns the survivors."""
    left = set(pids)
    deadline = time.monotonic() + timeout
    while left:
        left = {p for p in left if is_running(p)}
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return left


def terminate(pids: Iterable[int], grace: float = 5.0) -> set[int]:
    """SIGTERM, wait up to ``grace``, then SIGKILL; returns pids still running after that."""
    pids = {p for p in pids if is_running(p)}
    signal_pids(pids, signal.SIGTERM)
    left = wait_gone(pids, grace)
    if left:
        signal_pids(left, signal.SIGKILL)
        left = wait_gone(left, 2.0)
    return left
