"""kvtrainer.py as a user would submit it to Slurm: 2 nodes, one torchrun per node, gloo.

Nothing here is trainmedic's: the batch script a user writes (``--requeue`` so Slurm and
trainmedic may requeue it, ``--open-mode=append`` so every attempt stays in the output,
stderr in a file of its own, a rendezvous port per attempt) and the job's opt-in comment.
"""

from __future__ import annotations

import json
import random
import shlex
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TRAINER = Path(__file__).resolve().parent / "kvtrainer.py"


@dataclass(frozen=True)
class KvJob:
    run_dir: Path
    fail_at: int = 0  # the iteration rank ``fail_rank`` raises at (0: never)
    fail_rank: int = 1
    ckpt_every: int = 50
    step_sleep: float = 0.01
    nnodes: int = 2
    nproc_per_node: int = 2
    name: str = "kvtrainer"
    opt_in: Mapping[str, object] = field(default_factory=dict)  # the comment's policy
    # One rendezvous port per attempt, free when submitted: the last attempt's store may hold
    # its own still, and other jobs on this shared machine hold theirs.
    ports: tuple[int, ...] = field(default_factory=lambda: free_ports(8))

    @property
    def output(self) -> Path:
        return self.run_dir / "kv.out"

    @property
    def errors(self) -> Path:
        return self.run_dir / "kv.err"

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "ckpt"


def free_ports(count: int) -> tuple[int, ...]:
    """Ports below the ephemeral range that nothing listens on now."""
    found: list[int] = []
    while len(found) < count:
        port = random.randrange(20000, 30000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in found:
            found.append(port)
    return tuple(found)


def batch_script(job: KvJob) -> str:
    trainer = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={job.nnodes}",
        f"--nproc_per_node={job.nproc_per_node}",
        "--master_addr=127.0.0.1",
    ]
    args = [
        str(TRAINER),
        f"--ckpt-dir={job.checkpoint_dir}",
        f"--ckpt-every={job.ckpt_every}",
        f"--step-sleep={job.step_sleep}",
        f"--fail-at={job.fail_at}",
        f"--fail-rank={job.fail_rank}",
    ]
    per_node = (
        f"exec {shlex.join(trainer)} --node_rank=$SLURM_NODEID --master_port=$PORT "
        f"{shlex.join(args)}"
    )
    return "\n".join(
        [
            "#!/bin/bash",
            # a fresh port per attempt: the last attempt's store may still hold the old one
            f"PORTS=({' '.join(map(str, job.ports))})",
            "export PORT=${PORTS[$(( ${SLURM_RESTART_COUNT:-0} % ${#PORTS[@]} ))]}",
            "export PYTHONUNBUFFERED=1",
            f"srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote(per_node)}",
            "",
        ]
    )


def sbatch_args(job: KvJob) -> list[str]:
    job.run_dir.mkdir(parents=True, exist_ok=True)
    script = job.run_dir / "kv.sh"
    script.write_text(batch_script(job))
    script.chmod(0o755)
    comment = json.dumps({"trainmedic": dict(job.opt_in)}, separators=(",", ":"))
    return [
        "--requeue",
        "--open-mode=append",
        f"-N{job.nnodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={job.nproc_per_node}",
        f"--job-name={job.name}",
        f"--output={job.output}",
        f"--error={job.errors}",
        f"--chdir={job.run_dir}",
        f"--comment={comment}",
        str(script),
    ]
