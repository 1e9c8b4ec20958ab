"""A real PyTorch DDP trainer on CPU (gloo) for the demo and the end-to-end tests.

Run under torchrun, e.g. two "nodes" of two ranks on one machine::

    TRAINMEDIC_NODE=node1 torchrun --nnodes=2 --node_rank=0 --nproc_per_node=2 \\
        --master_addr=127.0.0.1 --master_port=29500 \\
        -m trainmedic.demo.trainer.cli --run-dir RUN --iters 300 --ckpt-every 50

A small MLP learns a fixed random teacher on seeded synthetic data, data-parallel over all
ranks. Each step does forward and backward locally (timed as ``compute_s``), then one
explicit allreduce of the flattened gradients with the loss appended (timed as ``wait_s``):
the summed loss doubles as the global finite-loss check, so every rank stops together on NaN.
Rank 0 checkpoints every
``--ckpt-every`` steps; every rank resumes from the newest checkpoint on start. Log format:
``trainmedic.demo.trainer.rank_log``; fault injection: ``trainmedic.demo.trainer.faults``.

Environment: TRAINMEDIC_NODE (else SLURMD_NODENAME, else the hostname), TRAINMEDIC_ATTEMPT
(else SLURM_RESTART_COUNT, else 0), TRAINMEDIC_KERNEL_LOG (where hardware faults append;
default RUN/kern-<node>.log), TRAINMEDIC_FAULTS (fault JSON). Without torchrun it runs as a
world of one. Exit status: 0 done, 1 failure (NaN loss, error, fault).

Lines, besides progress: ``trainer start attempt=A node=N world_size=W``, ``resumed from
checkpoint iter=N`` (the next iteration is N + 1), ``checkpoint begin iter=N``, ``checkpoint
saved iter=N path=P``, ``loss is nan at iter=N``, ``training done iter=N``, and tracebacks
(every line prefixed). ``--ckpt-delay`` stretches checkpoint writes to test that a watcher
does not call a checkpoint a hang; ``--comm-timeout`` bounds how long peers of a hung rank
wait before gloo's ``Timed out waiting ...ms`` error.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from trainmedic.demo.trainer.faults import parse_faults
from trainmedic.demo.trainer.rank_log import RankLog


@dataclass(frozen=True, slots=True)
class WorkerEnv:
    """Who this process is, from torchrun's and the launcher's environment."""

    rank: int
    local_rank: int
    world_size: int
    node: str
    attempt: int
    kernel_log: Path | None
    faults_json: str

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> WorkerEnv:
        env = dict(os.environ if environ is None else environ)
        node = env.get("TRAINMEDIC_NODE") or env.get("SLURMD_NODENAME") or socket.gethostname()
        attempt = env.get("TRAINMEDIC_ATTEMPT") or env.get("SLURM_RESTART_COUNT") or "0"
        kernel_log = env.get("TRAINMEDIC_KERNEL_LOG")
        return cls(
            rank=int(env.get("RANK", "0")),
            local_rank=int(env.get("LOCAL_RANK", "0")),
            world_size=int(env.get("WORLD_SIZE", "1")),
            node=node,
            attempt=int(attempt),
            kernel_log=Path(kernel_log) if kernel_log else None,
            faults_json=env.get("TRAINMEDIC_FAULTS", ""),
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainmedic.demo.trainer", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--run-dir", type=Path, required=True, help="checkpoints, faults.json")
    parser.add_argument("--iters", type=int, default=1000, help="total iterations (target)")
    parser.add_argument("--ckpt-every", type=int, default=50, help="checkpoint every K iters")
    parser.add_argument(
        "--step-sleep",
        type=float,
        default=0.005,
        help="seconds slept per step, to hold a target rate and leave CPU to the watcher",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument(
        "--comm-timeout", type=float, default=300.0, help="gloo collective timeout, seconds"
    )
    parser.add_argument(
        "--ckpt-delay", type=float, default=0.0, help="extra seconds per checkpoint write"
    )
    parser.add_argument(
        "--progress-jsonl",
        action="store_true",
        help="also append progress as JSONL to RUN/progress/<node>-rank<r>.jsonl",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Train, then leave through ``os._exit`` (torch 2.13 + gloo can abort in interpreter
    teardown after a clean run; see TORCH_CPU.md)."""
    args = build_parser().parse_args(argv)
    env = WorkerEnv.from_environ()
    jsonl_dir = args.run_dir / "progress" if args.progress_jsonl else None
    log = RankLog(env.rank, env.node, jsonl_dir=jsonl_dir)
    log.line(f"trainer start attempt={env.attempt} node={env.node} world_size={env.world_size}")
    try:
        parse_faults(env.faults_json, "TRAINMEDIC_FAULTS")
    except ValueError as exc:
        log.line(f"ERROR: {exc}")
        os._exit(2)
    status = 1
    try:
        # torch is imported only now, so the start line shows when the process began.
        from trainmedic.demo.trainer.train_loop import train

        status = train(args, env, log)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        status = 130
    # Top-level boundary of a worker process: whatever went wrong, log it with this rank's
    # prefix (the job log keeps the root cause) and exit non-zero.
    except Exception as exc:
        log.exception(exc)
        status = 1
    finally:
        log.close()
    sys.stdout.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
