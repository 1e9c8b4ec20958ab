"""``trainmedic serve`` keeps a watchdog running: a child process, started again if it dies.

A child process, not a thread, so that the watchdog outlives a ``kill -9`` of the service it
guards (that is when it is needed) until no hold is open; it runs in its own session, so a
signal to the service's process group does not reach it. Only one watchdog acts per state
directory: it holds an exclusive lock (``watchdog.lock``), and a second one (a restarted
service's child, while the killed service's child still runs) stands by until it is free.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = "watchdog.lock"
RESTART_DELAY_S = 1.0
STOP_GRACE_S = 5.0


def watchdog_command(config_path: str | None) -> list[str]:
    """The watchdog as this process's child: it stays while this process lives, and after
    it died as long as a hold is open."""
    argv = [sys.executable, "-m", "trainmedic.cli.main", "watchdog", "--parent", str(os.getpid())]
    return [*argv, "--config", config_path] if config_path else argv


class ChildSupervisor:
    """Runs ``argv`` and runs it again ``RESTART_DELAY_S`` after it exits, until ``stop``."""

    def __init__(self, argv: Sequence[str], *, name: str = "watchdog") -> None:
        self.argv = list(argv)
        self.name = name
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"supervise-{name}", daemon=True)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=STOP_GRACE_S + 2)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._proc = subprocess.Popen(self.argv, start_new_session=True)
            except OSError as exc:
                log.error("cannot start the %s: %s", self.name, exc)
                self._stop.wait(RESTART_DELAY_S * 10)
                continue
            self.starts += 1
            while self._proc.poll() is None and not self._stop.wait(0.2):
                pass
            if self._stop.is_set():
                self._terminate(self._proc)
                return
            log.warning(
                "the %s exited (code %s): starting it again", self.name, self._proc.returncode
            )
            self._stop.wait(RESTART_DELAY_S)

    @staticmethod
    def _terminate(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class SingleInstance:
    """An exclusive ``flock`` on ``<state_dir>/watchdog.lock``, held while the process lives."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.path = Path(state_dir) / LOCK_NAME
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def wait(self, stop: threading.Event, interval_s: float) -> bool:
        """Stand by until the lock is ours (True) or ``stop`` is set (False)."""
        while not self.try_acquire():
            if stop.wait(interval_s):
                return False
        return True
