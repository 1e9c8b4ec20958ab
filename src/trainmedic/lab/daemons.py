"""The processes one lab cluster started, recorded by pid and start time in ``pids.json`` so
that this process or a later one (``python -m trainmedic.lab down``) stops exactly those,
together with the job processes their slurmstepds left behind."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainmedic.lab import procs
from trainmedic.lab.install import SlurmLabUnavailable


@dataclass(frozen=True, slots=True)
class Daemon:
    """One process we started: name, pid and start time (so a reused pid is never ours)."""

    name: str
    pid: int
    start_ticks: int

    def is_ours_and_running(self) -> bool:
        return procs.is_running(self.pid) and procs.start_ticks(self.pid) == self.start_ticks


def job_processes(spool: Path) -> set[int]:
    """slurmstepds serving steps under ``spool`` and every process below them."""
    stepds = procs.step_daemon_pids(spool)
    return stepds | procs.descendants(stepds)


class DaemonSet:
    def __init__(self, log_dir: Path, pids_path: Path, spool_root: Path) -> None:
        self.log_dir = log_dir
        self.pids_path = pids_path
        self.spool_root = spool_root
        self.daemons: dict[str, Daemon] = {}
        self._popens: dict[str, subprocess.Popen[bytes]] = {}

    @classmethod
    def load(cls, log_dir: Path, pids_path: Path, spool_root: Path) -> DaemonSet:
        """The set another process recorded; empty when there is no readable record."""
        found = cls(log_dir, pids_path, spool_root)
        try:
            records = json.loads(pids_path.read_text())
            for r in records:
                found.daemons[r["name"]] = Daemon(r["name"], int(r["pid"]), int(r["start_ticks"]))
        except (OSError, ValueError, TypeError, KeyError):
            found.daemons = {}
        return found

    def pid(self, name: str) -> int | None:
        daemon = self.daemons.get(name)
        return daemon.pid if daemon else None

    def spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> Daemon:
        """Start ``argv`` in the foreground of a new session, output to ``<log_dir>/<name>.out``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / (name.replace(":", "-") + ".out"), "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=dict(env),
            )
        time.sleep(0.02)
        if proc.poll() is not None:
            raise SlurmLabUnavailable(
                f"slurm lab: {name} exited at once ({proc.returncode}); see {self.log_dir}"
            )
        ticks = procs.start_ticks(proc.pid)
        daemon = Daemon(name, proc.pid, ticks if ticks is not None else -1)
        self.daemons[name] = daemon
        self._popens[name] = proc
        self.save()
        return daemon

    def kill(self, name: str, spool: Path) -> None:
        """SIGKILL one daemon and the job processes under ``spool`` (a node dying)."""
        victims = job_processes(spool)
        daemon = self.daemons.pop(name, None)
        if daemon is not None and daemon.is_ours_and_running():
            victims.add(daemon.pid)
        procs.signal_pids(victims, signal.SIGKILL)
        procs.wait_gone(victims, 5.0)
        self._reap()
        self.save()

    def stop_all(self) -> int:
        """Job processes first (SIGKILL), then the daemons newest first (SIGTERM, then KILL).
        Returns how many daemons were running; RuntimeError if any survives."""
        jobs = job_processes(self.spool_root)
        procs.signal_pids(jobs, signal.SIGKILL)
        procs.wait_gone(jobs, 5.0)
        mine = [d.pid for d in reversed(self.daemons.values()) if d.is_ours_and_running()]
        left = procs.terminate(mine)
        self._reap()
        self.daemons = {}
        self.save()
        if left:
            raise RuntimeError(f"slurm lab: processes {sorted(left)} survived SIGKILL")
        return len(mine)

    def save(self) -> None:
        records = [
            {"name": d.name, "pid": d.pid, "start_ticks": d.start_ticks}
            for d in self.daemons.values()
        ]
        self.pids_path.parent.mkdir(parents=True, exist_ok=True)
        self.pids_path.write_text(json.dumps(records, indent=1))

    def _reap(self) -> None:
        """Collect exit statuses of our own children, so none stays a zombie."""
        for name, proc in list(self._popens.items()):
            if proc.poll() is not None:
                del self._popens[name]
