"""A real multi-node Slurm cluster on one host: munge + slurmctld + N slurmd (one port and one
spool directory each), plus a kernel-log file and a GPU-telemetry endpoint per virtual node.

Every daemon runs in the foreground as our child, so its pid is known exactly; ``stop`` ends
exactly those pids (and the job processes their slurmstepds left), nothing found by name.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from trainmedic.lab import procs
from trainmedic.lab.conf import (
    LabLayout,
    layout_from_json,
    layout_to_json,
    render_slurm_conf,
)
from trainmedic.lab.daemons import DaemonSet
from trainmedic.lab.install import SlurmLabUnavailable, ensure_installed, find_binary
from trainmedic.lab.telemetry import GPUS_PER_NODE, set_gpu_metric

LAB_DIR_ENV = "TRAINMEDIC_LAB_DIR"


class SlurmCluster:
    """``with SlurmCluster(tmp) as c: subprocess.run(["sinfo"], env=c.env())``."""

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        nodes: int = 4,
        cpus_per_node: int = 2,
        cred_expire: int = 10,
        slurmd_timeout: int = 10,
        return_to_service: int = 1,
        gpus_per_node: int = GPUS_PER_NODE,
        node_prefix: str = "node",
        install: bool = True,
        start_timeout: float = 30.0,
    ) -> None:
        base = Path(base_dir).resolve()
        ports = procs.free_ports(1 + 2 * nodes)
        self.layout = LabLayout(
            base=base,
            cluster_name="tmlab",
            node_names=tuple(f"{node_prefix}{i}" for i in range(1, nodes + 1)),
            slurmctld_port=ports[0],
            slurmd_ports=ports[1 : 1 + nodes],
            telemetry_ports=ports[1 + nodes :],
            cpus_per_node=cpus_per_node,
            cred_expire=cred_expire,
            slurmd_timeout=slurmd_timeout,
            return_to_service=return_to_service,
        )
        self.gpus_per_node = gpus_per_node
        self._install = install
        self._start_timeout = start_timeout
        self.daemons = DaemonSet(self.layout.log_dir, self.layout.pids_path, self.layout.spool_root)
        self.start_seconds: float | None = None

    # -- what tests and the demo use ------------------------------------------------------

    @property
    def base(self) -> Path:
        return self.layout.base

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.layout.node_names

    @property
    def conf_path(self) -> Path:
        return self.layout.conf_path

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for client commands (sbatch, squeue, scontrol ...)."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.layout.conf_path)
        env[LAB_DIR_ENV] = str(self.base)
        env.update(extra or {})
        return env

    def kernel_log(self, node: str) -> Path:
        """The node's kernel log (where Xid / ECC / link errors of that node are written)."""
        return self.layout.node_dir(self._known(node)) / "kern.log"

    def node_dir(self, node: str) -> Path:
        return self.layout.node_dir(self._known(node))

    def telemetry_url(self, node: str) -> str:
        port = self.layout.telemetry_ports[self.nodes.index(self._known(node))]
        return f"http://127.0.0.1:{port}/metrics"

    def set_gpu_metric(self, node: str, gpu: int, metric: str, value: float) -> None:
        set_gpu_metric(self.node_dir(node), gpu, metric, value)

    def run(self, argv: list[str], timeout: float = 30.0, check: bool = True) -> str:
        """Run a Slurm client command against this cluster; its stdout."""
        done = subprocess.run(
            argv, env=self.env(), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}"
            )
        return done.stdout

    def sbatch(self, args: list[str]) -> str:
        """Submit a batch job (``args`` after ``sbatch --parsable``); its job id."""
        return self.run(["sbatch", "--parsable", *args]).strip().split(";")[0]

    def node_states(self) -> dict[str, str]:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False)
        return dict(line.split(None, 1) for line in out.splitlines() if " " in line)

    def job_state(self, job_id: str) -> str:
        return self.run(
            ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], check=False
        ).strip()

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 30.0) -> float:
        """Poll ``check`` every 0.1 s until true; seconds it took. TimeoutError names ``what``."""
        t0 = time.monotonic()
        while not check():
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"slurm lab: {what} not reached within {timeout:.0f} s")
            time.sleep(0.1)
        return time.monotonic() - t0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        t0 = time.monotonic()
        ensure_installed(self._install)
        lay = self.layout
        for d in (lay.munge_dir, lay.state_dir, lay.log_dir, lay.run_dir, lay.conf_path.parent):
            d.mkdir(parents=True, exist_ok=True)
        (lay.base / "tmp").mkdir(exist_ok=True)
        os.chmod(lay.munge_dir, 0o700)
        for node in self.nodes:
            lay.spool_dir(node).mkdir(parents=True, exist_ok=True)
            lay.node_dir(node).mkdir(parents=True, exist_ok=True)
            self.kernel_log(node).touch()
        lay.conf_path.write_text(render_slurm_conf(lay))
        lay.layout_path.write_text(layout_to_json(lay))
        try:
            self._start_munge()
            self._spawn("slurmctld", [_bin("slurmctld"), "-D", "-c", "-f", str(lay.conf_path)])
            for node in self.nodes:
                self.start_node(node)
            self._start_telemetry()
            self.wait_for("all nodes idle", self._all_idle, self._start_timeout)
            self.wait_for("telemetry endpoints", self._telemetry_up, self._start_timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0

    def start_node(self, node: str) -> None:
        """Start (or restart after ``kill_node``) the slurmd of one node."""
        self._spawn(f"slurmd:{node}", [_bin("slurmd"), "-D", "-f", str(self.conf_path), "-N", node])

    def kill_node(self, node: str) -> None:
        """Simulate a node's death: SIGKILL its slurmd and the job processes it was running
        (``start_node`` brings it back)."""
        self.daemons.kill(f"slurmd:{self._known(node)}", self.layout.spool_dir(node))

    def stop(self) -> None:
        """Stop exactly what we started: job processes first, then the daemons, newest first."""
        self.daemons.stop_all()

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @classmethod
    def attach(cls, base_dir: str | os.PathLike[str]) -> SlurmCluster:
        """A handle on a cluster started by another process (``python -m trainmedic.lab
        up``): env, kernel logs, telemetry, client commands; ``stop`` stops its daemons."""
        base = Path(base_dir).resolve()
        try:
            layout = layout_from_json((base / "run" / "cluster.json").read_text())
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise SlurmLabUnavailable(f"slurm lab: no cluster recorded in {base}: {err}") from None
        cluster = cls(base, nodes=len(layout.node_names))
        cluster.layout = layout
        cluster.daemons = DaemonSet.load(layout.log_dir, layout.pids_path, layout.spool_root)
        return cluster

    @staticmethod
    def stop_recorded(base_dir: str | os.PathLike[str]) -> int:
        """Stop what a cluster in ``base_dir`` recorded (from another process: ``down``);
        how many daemons were running."""
        base = Path(base_dir).resolve()
        return DaemonSet.load(base / "log", base / "run" / "pids.json", base / "spool").stop_all()

    # -- internals --------------------------------------------------------------------------

    def _known(self, node: str) -> str:
        if node not in self.nodes:
            raise KeyError(f"slurm lab: unknown node {node!r} (nodes: {', '.join(self.nodes)})")
        return node

    def _all_idle(self) -> bool:
        states = self.node_states()
        return len(states) == len(self.nodes) and all(s == "idle" for s in states.values())

    def _telemetry_up(self) -> bool:
        for port in self.layout.telemetry_ports:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            except OSError:
                return False
        return True

    def _start_munge(self) -> None:
        lay = self.layout
        if not lay.munge_key.exists():
            subprocess.run(
                [_bin("mungekey"), "--create", f"--keyfile={lay.munge_key}"],
                check=True,
                capture_output=True,
            )
            os.chmod(lay.munge_key, 0o400)
        self._spawn(
            "munged",
            [
                _bin("munged"),
                "-F",
                "--force",
                f"--key-file={lay.munge_key}",
                f"--socket={lay.munge_socket}",
                f"--pid-file={lay.munge_dir / 'munged.pid'}",
                f"--log-file={lay.munge_dir / 'munged.log'}",
                f"--seed-file={lay.munge_dir / 'munged.seed'}",
            ],
        )
        self.wait_for("munge socket", lay.munge_socket.exists, 10.0)

    def _start_telemetry(self) -> None:
        pairs = [f"{n}={p}" for n, p in zip(self.nodes, self.layout.telemetry_ports, strict=True)]
        self._spawn(
            "telemetry",
            [
                sys.executable,
                "-m",
                "trainmedic.lab.telemetry",
                f"--nodes-dir={self.base / 'nodes'}",
                f"--gpus={self.gpus_per_node}",
                *pairs,
            ],
        )

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.daemons.spawn(name, argv, self.env())


def _bin(name: str) -> str:
    path = find_binary(name)
    if path is None:
        raise SlurmLabUnavailable(f"slurm lab: {name} not found")
    return path
