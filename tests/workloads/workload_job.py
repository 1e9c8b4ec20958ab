"""A framework workload as a 2-node Slurm batch job on the lab cluster, and its test trace.

The batch script is what a Slurm user writes (docs/slurm-users.md): one ``srun`` task per
node starts ``torchrun`` there (2 ranks per node, gloo on CPU), the rendezvous port changes
with every attempt (``MASTER_PORT`` from the job id and ``SLURM_RESTART_COUNT``), and the
job opts in to trainmedic through its comment. ``sbatch`` gets ``--requeue`` (trainmedic and
Slurm requeue the job), ``--open-mode=append`` (a requeued job's output is otherwise
truncated) and a separate ``--error`` file.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORKLOADS = Path(__file__).resolve().parent

# Per framework: the script, its arguments (given the run dir) and its pace. Step sleeps set
# each framework's reporting cadence: Megatron's one line per 100 iterations comes every
# ~10-15 s, as a real job's would come every few minutes.
FRAMEWORKS: dict[str, dict[str, Any]] = {
    "megatron": {
        "script": "megatron/train.py",
        "args": lambda run: ["--save", str(run / "checkpoints"), "--save-interval", "200"],
        "ckpt_every": 200,
        "step_sleep": 0.1,
    },
    "jsonl": {
        "script": "jsonl/train.py",
        "args": lambda run: ["--ckpt-dir", str(run / "checkpoints"), "--ckpt-every", "100"],
        "ckpt_every": 100,
        "step_sleep": 0.05,
        # The job declares its format: structlog-style JSON is no format trainmedic knows.
        "progress_regex": r'"event": "train_step", "step": (?P<iter>\d+), "loss": (?P<loss>\S+),',
    },
    "lightning": {
        "script": "lightning/train.py",
        "args": lambda run: [
            "--ckpt-dir",
            str(run / "checkpoints"),
            "--ckpt-every",
            "200",
            "--progress-bar",
            "tqdm",
        ],
        # One checkpoint per epoch (200 batches): resumed at an epoch's start, the bar reads
        # "Epoch E: n/200" (step E x 200 + n); resumed mid-epoch it reads "Training: n/?",
        # the epoch's batch count without the epoch; trainmedic places both at the global
        # step by the checkpoint the attempt resumed from (core.engine.epoch_bar).
        "ckpt_every": 200,
        "step_sleep": 0.05,
    },
    "hf_trainer": {
        "script": "hf_trainer/train.py",
        "args": lambda run: ["--output-dir", str(run / "checkpoints"), "--save-steps", "100"],
        "ckpt_every": 100,
        "step_sleep": 0.05,
        "env": {"TZ": "America/New_York", "HF_HUB_OFFLINE": "1"},
    },
}


@dataclass(frozen=True, slots=True)
class WorkloadJob:
    framework: str
    run_dir: Path
    nnodes: int = 2
    nproc_per_node: int = 2
    python: str = sys.executable
    comm_timeout_s: float = 600.0
    declare_progress: bool = True  # put the framework's progress_regex (if any) in the comment
    extra_args: tuple[str, ...] = ()
    policy: Mapping[str, Any] = field(default_factory=dict)
    # First rendezvous port of this job's attempts. Lab clusters number their jobs from 1, so
    # a fixed base makes two lab sessions on one machine pick the same port (EADDRINUSE at
    # start-up); the tests pick one per session.
    port_base: int = 20000

    @property
    def spec(self) -> dict[str, Any]:
        return FRAMEWORKS[self.framework]

    @property
    def output(self) -> Path:
        return self.run_dir / "job.out"

    @property
    def errors(self) -> Path:
        return self.run_dir / "job.err"

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def ckpt_every(self) -> int:
        return int(self.spec["ckpt_every"])

    def comment(self) -> str:
        policy: dict[str, Any] = {"checkpoint_dir": str(self.checkpoint_dir), **self.policy}
        if self.declare_progress and "progress_regex" in self.spec:
            policy["progress_regex"] = self.spec["progress_regex"]
        return json.dumps({"trainmedic": policy}, separators=(",", ":"))

    def batch_script(self) -> str:
        script = WORKLOADS / self.spec["script"]
        args = [*self.spec["args"](self.run_dir), *self.extra_args]
        env = {
            "WORKLOAD_RUN_DIR": str(self.run_dir),
            "WORKLOAD_STEP_SLEEP": str(self.spec["step_sleep"]),
            "WORKLOAD_COMM_TIMEOUT": str(self.comm_timeout_s),
            "PYTHONUNBUFFERED": "1",
            **self.spec.get("env", {}),
        }
        per_node = (
            f"exec {shlex.quote(self.python)} -m torch.distributed.run "
            f"--nnodes={self.nnodes} --nproc_per_node={self.nproc_per_node} "
            "--node_rank=$SLURM_NODEID --master_addr=127.0.0.1 --master_port=$MASTER_PORT "
            f"{shlex.join([str(script), *args])}"
        )
        return "\n".join(
            [
                "#!/bin/bash",
                f"# {self.framework} workload: one torchrun per node",
                # A new port per attempt: the last attempt's store port may still be taken.
                f"export MASTER_PORT=$(( {self.port_base} + (SLURM_JOB_ID * 16 + "
                "${SLURM_RESTART_COUNT:-0}) % 2000 ))",
                *(f"export {k}={shlex.quote(v)}" for k, v in env.items()),
                f"srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote(per_node)}",
                "",
            ]
        )

    def sbatch_args(self, name: str) -> list[str]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        script = self.run_dir / "job.sh"
        script.write_text(self.batch_script())
        script.chmod(0o755)
        return [
            "--requeue",
            "--open-mode=append",
            f"-N{self.nnodes}",
            "--ntasks-per-node=1",
            f"--cpus-per-task={self.nproc_per_node}",
            f"--job-name={name}",
            f"--output={self.output}",
            f"--error={self.errors}",
            f"--chdir={self.run_dir}",
            f"--comment={self.comment()}",
            str(script),
        ]

    def inject(self, faults: Sequence[Mapping[str, Any]]) -> None:
        tmp = self.run_dir / "faults.json.tmp"
        tmp.write_text(json.dumps(list(faults)))
        tmp.replace(self.run_dir / "faults.json")


@dataclass
class Attempt:
    """One attempt as the workload's trace tells it (rank 0's view, plus fired faults)."""

    number: int
    started_at: float | None = None
    resumed_from: int | None = None
    first_step_at: float | None = None
    first_step: int | None = None
    last_step: int | None = None
    last_step_at: float | None = None
    checkpoints: list[int] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    nodes: set[str] = field(default_factory=set)


def read_trace(run_dir: Path) -> dict[int, Attempt]:
    attempts: dict[int, Attempt] = {}
    try:
        text = (run_dir / "trace.jsonl").read_text()
    except FileNotFoundError:
        return attempts
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written
        number = int(record["attempt"])
        attempt = attempts.setdefault(number, Attempt(number))
        attempt.nodes.add(record.get("node", ""))
        event, t = record["event"], float(record["t"])
        if event == "start":
            attempt.started_at = t
            attempt.resumed_from = int(record.get("resumed_from", 0))
        elif event == "step":
            step = int(record["iter"])
            if attempt.first_step is None:
                attempt.first_step, attempt.first_step_at = step, t
            attempt.last_step, attempt.last_step_at = step, t
        elif event == "checkpoint":
            attempt.checkpoints.append(int(record["iter"]))
        elif event == "fault":
            attempt.faults.append(record)
    return attempts
