"""The example trainer's torch part: process group, model, resume, the timed training loop."""

from __future__ import annotations

import argparse
import math
import os
import socket
import time
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import nn
from torch._C._distributed_c10d import PrefixStore, TCPStore

from trainmedic.demo.trainer import checkpoints
from trainmedic.demo.trainer.fault_injector import FaultInjector
from trainmedic.demo.trainer.rank_log import RankLog, StepReport

if TYPE_CHECKING:
    from trainmedic.demo.trainer.cli import WorkerEnv

IN_FEATURES = 32


def init_distributed(timeout_s: float) -> None:
    """gloo process group. Under torchrun's agent store, use a key prefix per restart: with
    torch 2.13 restarted workers otherwise read the previous round's stale addresses."""
    timeout = timedelta(seconds=timeout_s)
    if "RANK" not in os.environ:  # run without torchrun: a world of one
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true":
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        base = TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=timeout,
        )
        store = PrefixStore(f"restart_{restart}", base)
        dist.init_process_group(
            "gloo",
            store=store,
            rank=int(os.environ["RANK"]),
            world_size=int(os.environ["WORLD_SIZE"]),
            timeout=timeout,
        )
    else:
        dist.init_process_group("gloo", init_method="env://", timeout=timeout)


def build_model(hidden: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(IN_FEATURES, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )


def synthetic_batch(
    seed: int, iteration: int, rank: int, batch_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded batch: the same (seed, iteration, rank) gives the same data on every attempt."""
    teacher = torch.Generator().manual_seed(seed)
    weights = torch.randn(IN_FEATURES, 1, generator=teacher) / math.sqrt(IN_FEATURES)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + iteration * 1009 + rank)
    x = torch.randn(batch_size, IN_FEATURES, generator=gen)
    y = torch.tanh(x @ weights) + 0.01 * torch.randn(batch_size, 1, generator=gen)
    return x, y


class MomentumSGD:
    """SGD with momentum in a few lines. ``torch.optim.SGD(...)`` imports torch._dynamo on
    construction (about 1 s), which every restart would pay before its first step."""

    def __init__(self, params: list[torch.Tensor], lr: float, momentum: float = 0.9) -> None:
        self.params = params
        self.lr = lr
        self.momentum = momentum
        self.buffers = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor]) -> None:
        for param, grad, buffer in zip(self.params, grads, self.buffers, strict=True):
            buffer.mul_(self.momentum).add_(grad)
            param.add_(buffer, alpha=-self.lr)

    def state_dict(self) -> dict[str, object]:
        return {"momentum": [b.clone() for b in self.buffers]}

    def load_state_dict(self, state: dict[str, list[torch.Tensor]]) -> None:
        for buffer, saved in zip(self.buffers, state["momentum"], strict=True):
            buffer.copy_(saved)


def _resume_iteration(args: argparse.Namespace, rank: int) -> int:
    """Rank 0 picks the newest checkpoint and tells everyone, so all ranks load the same one."""
    chosen = torch.zeros(1, dtype=torch.int64)
    if rank == 0:
        newest = checkpoints.newest_checkpoint(args.run_dir / "checkpoints")
        chosen[0] = newest[0] if newest else 0
    dist.broadcast(chosen, src=0)
    return int(chosen[0])


def train(args: argparse.Namespace, env: WorkerEnv, log: RankLog) -> int:
    """The training run of one rank; returns the exit status."""
    kernel_log = env.kernel_log or args.run_dir / f"kern-{env.node}.log"
    injector = FaultInjector(
        args.run_dir, log, env.local_rank, env.attempt, kernel_log, env.faults_json
    )
    torch.set_num_threads(1)
    init_distributed(args.comm_timeout)
    model = build_model(args.hidden, args.seed)
    # Data parallelism by hand rather than DistributedDataParallel(model): DDP's constructor
    # imports torch._dynamo, 1.2 s alone and 2.8 s with 4 ranks on 2 cores, half of a
    # restart's cost. Same semantics: identical start weights, averaged gradients.
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)
    params: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
    optimizer = MomentumSGD(params, lr=args.lr)
    ckpt_dir = args.run_dir / "checkpoints"
    start = _resume_iteration(args, env.rank)
    if start > 0:
        state = checkpoints.load(checkpoints.checkpoint_path(ckpt_dir, start))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        log.line(f"resumed from checkpoint iter={start}")
    world = float(env.world_size)
    last_end = time.perf_counter()
    launcher = os.getppid()
    for iteration in range(start + 1, args.iters + 1):
        if os.getppid() != launcher:
            # torchrun was killed (SIGKILL leaves workers running in their own sessions):
            # stop rather than train on as an orphan.
            log.line(f"launcher process {launcher} is gone; stopping at iter={iteration}")
            return 1
        injector.refresh()
        effects = injector.step_effects(iteration)
        x, y = synthetic_batch(args.seed, iteration, env.rank, args.batch_size)
        t0 = time.perf_counter()
        loss = nn.functional.mse_loss(model(x), y)
        if effects.nan:
            loss = loss * float("nan")
        loss.backward()  # type: ignore[no-untyped-call]
        if effects.slow_s:
            time.sleep(effects.slow_s)
        t1 = time.perf_counter()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads] + [loss.detach().reshape(1)])
        dist.all_reduce(flat)
        t2 = time.perf_counter()
        global_loss = float(flat[-1]) / world
        if not math.isfinite(global_loss):
            log.line(f"loss is nan at iter={iteration}")
            return 1
        flat /= world
        averaged, offset = [], 0
        for p in params:
            averaged.append(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
            p.grad = None
        optimizer.step(averaged)
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)
        end = time.perf_counter()
        step_s = end - last_end
        last_end = end
        log.progress(
            StepReport(
                iteration=iteration,
                loss=global_loss,
                step_s=step_s,
                compute_s=t1 - t0,
                wait_s=t2 - t1,
                samples_per_s=args.batch_size / step_s if step_s > 0 else 0.0,
            )
        )
        if env.rank == 0 and args.ckpt_every > 0 and iteration % args.ckpt_every == 0:
            log.line(f"checkpoint begin iter={iteration}")
            state = {"iteration": iteration, "model": model.state_dict()}
            state["optimizer"] = optimizer.state_dict()
            path = checkpoints.save_atomic(ckpt_dir, iteration, state, delay_s=args.ckpt_delay)
            log.line(f"checkpoint saved iter={iteration} path={path}")
    log.line(f"training done iter={args.iters}")
    dist.destroy_process_group()
    return 0
