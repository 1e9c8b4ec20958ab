"""What the multi-process service tests share: real ``trainmedic serve`` processes started,
waited on and stopped, and polling for a condition with a deadline."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
from tests.waiting import wait as shared_wait

from trainmedic.core.states import JobState
from trainmedic.store import Store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(what: str, check: Callable[[], Any], timeout: float = 90.0, every: float = 0.1) -> Any:
    """The shared wait with these multi-process tests' longer default."""
    return shared_wait(what, check, timeout, every)


def running_again(job: Callable[[], Any], bad: str, timeout: float = 90.0) -> Any:
    """``job()`` (the scheduler's view of it) once it is RUNNING in a later attempt, off the
    ``bad`` node."""
    return wait(
        f"the job running again without {bad}",
        lambda: (
            (j := job()).state is JobState.RUNNING and j.attempt >= 1 and bad not in j.nodes and j
        ),
        timeout,
    )


def serve(
    config: Path,
    log: Path,
    *,
    env: Mapping[str, str] | None = None,
    verbose: bool = False,
    api: bool = True,
) -> subprocess.Popen[bytes]:
    """``trainmedic serve --config config``, its output appended to ``log``."""
    argv = [sys.executable, "-m", "trainmedic.cli.main", "serve", "--config", str(config)]
    argv += [] if api else ["--no-api"]
    argv += ["-v"] if verbose else []
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
        )


def kill9(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)


def stop_all(procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each still running process, SIGKILL what does not end within 15 s."""
    alive = [p for p in procs if p.poll() is None]
    for proc in alive:
        proc.send_signal(signal.SIGTERM)
    for proc in alive:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def get_json(url: str, path: str) -> Any:
    try:
        return httpx.get(url + path, timeout=1.0).json()
    except httpx.HTTPError:
        return None


def last_iteration(store: Store, job_id: str) -> int | None:
    job = store.get_job(job_id)
    return job.last_iteration if job else None


def resumed(store: Store, job_id: str) -> bool:
    """Training goes on in a later attempt of the job (it reported progress)."""
    return (last_iteration(store, job_id) or 0) > 0 and any(
        a.attempt >= 1 and a.first_progress_at for a in store.list_attempts(job_id)
    )


def children(parent: int, arg: bytes) -> list[int]:
    """Live processes whose parent is ``parent`` and whose command line has the argument
    ``arg`` (from /proc: the service's other children, squeue or sinfo, are left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[1]) == parent and arg in argv:
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """The process runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
