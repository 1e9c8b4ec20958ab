"""A Megatron-style training loop in plain torch (DDP, gloo): Megatron-LM's own log lines.

Rank 0 prints what ``megatron/training`` prints: start-up lines, one ``iteration N/ M |``
line every ``--log-interval`` (100) iterations with the time in local time and no zone, and
the checkpointing lines (``saving checkpoint at iteration ...``, ``successfully saved ...``,
``loading checkpoint from ... at iteration N`` on resume). Megatron prints the training
line from the last rank; rank 0 here, which changes nothing the service can see.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common


def say(text: str) -> None:
    if dist.get_rank() == 0:
        common.write_line(text)


def now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def tracker(save: Path) -> Path:
    return save / "latest_checkpointed_iteration.txt"


def load(save: Path, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    try:
        iteration = int(tracker(save).read_text())
    except (FileNotFoundError, ValueError):
        say(f"WARNING: could not find the metadata file {tracker(save)}")
        say("    will not load any checkpoints and will start from random")
        return 0
    say(f" loading checkpoint from {save} at iteration {iteration}")
    state = torch.load(save / f"iter_{iteration:07d}.pt", weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    say(f"  successfully loaded checkpoint from {save} [ t 1/1, p 1/1 ] at iteration {iteration}")
    return iteration


def save_checkpoint(save: Path, iteration: int, model: nn.Module, opt: torch.optim.Optimizer):  # type: ignore[no-untyped-def]
    dist.barrier()
    say(f"saving checkpoint at iteration {iteration:7d} to {save} in torch format")
    if dist.get_rank() == 0:
        buffer = io.BytesIO()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
        common.atomic_write(save / f"iter_{iteration:07d}.pt", buffer.getvalue())
        common.atomic_write(tracker(save), str(iteration).encode())
        common.trace("checkpoint", iter=iteration)
    dist.barrier()
    say(f"  successfully saved checkpoint from iteration {iteration:7d} to {save} [ t 1/1, p 1/1 ]")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-iters", type=int, default=500_000)
    parser.add_argument("--log-interval", type=int, default=100)
    parser.add_argument("--save-interval", type=int, default=200)
    parser.add_argument("--save", type=Path, required=True)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    args = parser.parse_args()
    timeout = timedelta(seconds=float(os.environ.get("WORKLOAD_COMM_TIMEOUT", "600")))
    started = time.time()
    dist.init_process_group("gloo", timeout=timeout)
    world = dist.get_world_size()
    say(f"using world size: {world}, data-parallel size: {world}, tensor-model-parallel size: 1")
    say("> initializing torch distributed ...")
    say("> setting random seeds to 1234 ...")
    torch.manual_seed(1234)
    say(f"time to initialize megatron (seconds): {time.time() - started:.3f}")
    say(f"[after megatron is initialized] datetime: {now()} ")
    model = DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1.5e-4)
    args.save.mkdir(parents=True, exist_ok=True)
    iteration = load(args.save, model.module, opt)
    say("> building train, validation, and test datasets ...")
    say("done with setup ...")
    say("training ...")
    say(f"[before the start of training step] datetime: {now()} ")
    if dist.get_rank() == 0:
        common.trace("start", resumed_from=iteration)
    hook = common.FaultHook()
    gen = torch.Generator().manual_seed(dist.get_rank())
    total, window_start = 0.0, time.time()
    batch = args.micro_batch_size
    while iteration < args.train_iters:
        hook.at_step(iteration + 1)
        x = torch.randn(batch, 32, generator=gen)
        loss = ((model(x) - x[:, :1]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(common.step_sleep())
        iteration += 1
        total += loss.item()
        if dist.get_rank() == 0:
            common.trace("step", iter=iteration)
        if iteration % args.log_interval == 0:
            elapsed = (time.time() - window_start) / args.log_interval
            say(
                f" [{now()}] iteration {iteration:8d}/{args.train_iters:8d} |"
                f" consumed samples: {iteration * batch * world:12d} |"
                f" elapsed time per iteration (ms): {elapsed * 1000.0:.1f} |"
                f" learning rate: {1.5e-4:.6E} | global batch size: {batch * world:5d} |"
                f" lm loss: {total / args.log_interval:.6E} | loss scale: 1.0 |"
                f" grad norm: {1.0:.3f} | number of skipped iterations:   0 |"
                f" number of nan iterations:   0 |"
            )
            total, window_start = 0.0, time.time()
        if iteration % args.save_interval == 0:
            save_checkpoint(args.save, iteration, model.module, opt)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)  # torch 2.13 + gloo: a clean exit sometimes aborts in teardown
