"""The local scheduler's one seam to the operating system: start, watch and stop node
launches (a torchrun under the exit-recording wrapper, per node of a job)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from trainmedic.core.timestamps import iso_ms
from trainmedic.schedulers.local import launch as proc
from trainmedic.schedulers.local.state import JobRecord, Launch


class LaunchTable:
    """Processes of this scheduler's launches; children of this process are reaped here,
    launches adopted from a previous service instance are watched through /proc."""

    def __init__(self, cluster_dir: Path, python: str, grace_s: float) -> None:
        self.cluster_dir = cluster_dir
        self.python = python
        self.grace_s = grace_s
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def kernel_log(self, node: str) -> Path:
        return self.cluster_dir / "nodes" / node / "kern.log"

    def banner(self, job: JobRecord) -> None:
        """The attempt line every (re)start appends to the job's output."""
        out = Path(job.spec.run_dir) / "job.out"
        out.parent.mkdir(parents=True, exist_ok=True)
        line = (
            f"==== {iso_ms(time.time())} trainmedic-local job={job.job_id} "
            f"name={job.spec.name} attempt={job.attempt} nodes={','.join(job.nodes)} "
            "starting ====\n"
        )
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def spawn(self, job: JobRecord, launch: Launch, port: int) -> Launch:
        """Start one node's torchrun; returns the launch with the wrapper's pid."""
        spec = job.spec
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update(spec.env)
        env.update(
            TRAINMEDIC_NODE=launch.node,
            TRAINMEDIC_KERNEL_LOG=str(self.kernel_log(launch.node)),
            TRAINMEDIC_ATTEMPT=str(job.attempt),
            TRAINMEDIC_JOB_ID=job.job_id,
            PYTHONUNBUFFERED="1",
        )
        env[proc.LAUNCH_MARKER] = launch.marker
        argv = proc.torchrun_argv(
            spec.nnodes, launch.node_rank, spec.nproc_per_node, port, spec.command, self.python
        )
        wrapped = proc.wrapped_argv(argv, Path(launch.exit_file))
        run_dir = Path(spec.run_dir)
        child = proc.spawn(wrapped, env, run_dir / "job.out", cwd=Path(spec.cwd or "."))
        self._children[child.pid] = child
        return Launch(
            node=launch.node,
            node_rank=launch.node_rank,
            marker=launch.marker,
            exit_file=launch.exit_file,
            pid=child.pid,
        )

    def stop(self, launches: Sequence[Launch]) -> None:
        """SIGTERM, grace, SIGKILL; returns when no process of these launches is left."""
        proc.stop_launches(
            [launch.pid for launch in launches if launch.pid > 0],
            [launch.marker for launch in launches],
            self.grace_s,
        )
        for launch in launches:
            child = self._children.pop(launch.pid, None)
            if child is not None:
                child.wait()

    def alive(self, launch: Launch) -> bool:
        child = self._children.get(launch.pid)
        if child is not None:
            return child.poll() is None  # also reaps our own zombie
        # Adopted from an earlier instance: check the marker too, since a pid can be reused.
        return (
            launch.pid > 0
            and proc.pid_alive(launch.pid)
            and proc.has_marker(launch.pid, launch.marker)
        )

    @staticmethod
    def exit_code(launch: Launch) -> int | None:
        """The wrapper's recorded exit status; None while it has not written one."""
        try:
            return int(Path(launch.exit_file).read_text().strip())
        except FileNotFoundError:
            return None
        except ValueError:
            return -1  # a garbled file: the launch ended, how is unknown

    @staticmethod
    def exit_time(launch: Launch) -> float:
        try:
            return os.stat(launch.exit_file).st_mtime
        except FileNotFoundError:
            return float("inf")
