"""Process plumbing of the local scheduler: build torchrun command lines, start one node's
torchrun under a wrapper that records its exit status, and find, signal and reap processes.

torchrun starts each worker in a session of its own, so a process group kill does not reach
the workers if torchrun itself dies first. Every process of a launch therefore carries the
environment marker ``TRAINMEDIC_LAUNCH=<launch id>``, which workers inherit from torchrun;
``marked_pids`` finds them all in /proc (orphans included) for the final SIGKILL sweep.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

LAUNCH_MARKER = "TRAINMEDIC_LAUNCH"


def free_port() -> int:
    """A TCP port nobody listens on right now (bind to port 0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def torchrun_argv(
    nnodes: int,
    node_rank: int,
    nproc_per_node: int,
    master_port: int,
    command: Sequence[str],
    python: str = sys.executable,
) -> list[str]:
    """``python -m torch.distributed.run`` with static rendezvous on 127.0.0.1.

    ``command`` is what torchrun runs, e.g. ``["-m", "trainmedic.demo.trainer.cli", ...]``
    (a script path works too). The interpreter is named explicitly so the job runs in the
    same environment as the service, whatever PATH says.
    """
    return [
        python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nnodes}",
        f"--node_rank={node_rank}",
        f"--nproc_per_node={nproc_per_node}",
        "--master_addr=127.0.0.1",
        f"--master_port={master_port}",
        *command,
    ]


def wrapped_argv(argv: Sequence[str], exit_file: Path) -> list[str]:
    """``sh -c`` around ``argv`` that writes its exit status to ``exit_file`` (atomically,
    through a rename) when it ends, even if nobody is left to wait for it."""
    tmp = f"{exit_file}.tmp"
    script = (
        f'"$@"; rc=$?; echo "$rc" > {shlex.quote(tmp)} && mv {shlex.quote(tmp)} '
        f"{shlex.quote(str(exit_file))}; exit $rc"
    )
    return ["/bin/sh", "-c", script, "trainmedic-node", *argv]


def spawn(
    argv: Sequence[str], env: Mapping[str, str], output: Path, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session, stdout and stderr appended to ``output``."""
    output.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    """True when /proc/<pid>/stat exists and the process is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state follows the parenthesised command name, which may itself contain ')'.
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state not in (b"Z", b"X", b"")


def has_marker(pid: int, marker: str) -> bool:
    """True when process ``pid`` carries ``TRAINMEDIC_LAUNCH=<marker>`` (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return False
    return f"{LAUNCH_MARKER}={marker}".encode() in environ.split(b"\0")


def marked_pids(markers: Iterable[str]) -> list[int]:
    """Live processes whose environment has ``TRAINMEDIC_LAUNCH=<one of markers>``."""
    needles = {f"{LAUNCH_MARKER}={marker}".encode() for marker in markers}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if not needles.isdisjoint(environ.split(b"\0")) and pid_alive(int(entry)):
            found.append(int(entry))
    return found


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signal_pids(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def stop_launches(pgids: Sequence[int], markers: Sequence[str], grace_s: float) -> None:
    """Stop launches and return once none of their processes is left.

    SIGTERM goes to each wrapper's process group and to every worker directly (torchrun
    would only relay it, later). Workers get up to ``grace_s`` to exit. torchrun's own
    SIGTERM shutdown takes 1-2 s on a busy machine and achieves nothing once its workers
    are gone, so the wrapper groups are SIGKILLed as soon as the workers have exited; then
    anything still carrying a marker is SIGKILLed.
    """
    remaining = marked_pids(markers)
    for pgid in pgids:
        signal_group(pgid, signal.SIGTERM)
    signal_pids(remaining, signal.SIGTERM)
    groups = set(pgids)
    workers = [p for p in remaining if _pgid(p) not in groups]
    deadline = time.monotonic() + grace_s
    while workers and time.monotonic() < deadline:
        time.sleep(0.02)
        workers = [p for p in workers if pid_alive(p)]
    for _round in range(100):
        remaining = marked_pids(markers)
        if not remaining:
            return
        for pgid in pgids:
            signal_group(pgid, signal.SIGKILL)
        signal_pids(remaining, signal.SIGKILL)
        time.sleep(0.02)
