"""A small data-parallel trainer "of another author": not trainmedic's example trainer.

It knows nothing of trainmedic. It logs in its own ``key=value`` format, one ``os.write`` per
line, every rank to stdout::

    ts=2026-03-07T10:11:12.123Z rank=0 event=config train_iters=1000 ckpt_every=50 ...
    ts=... rank=0 event=resume ckpt=/run/ckpt/model_iter000850.pt iter=850
    ts=... rank=0 event=step iter=851 loss=0.231 dt_ms=12.4
    ts=... rank=0 event=ckpt iter=900 path=/run/ckpt/model_iter000900.pt

Rank 0 saves a checkpoint every ``--ckpt-every`` iterations (atomically); a restart resumes
from the newest one. ``--fail-at N --fail-rank R`` makes rank R raise a ``RuntimeError`` at
iteration N, whatever the attempt: a deterministic application bug. Python prints its
traceback on stderr; the other ranks then fail in gloo and torchrun prints its failure table.

Run under ``torchrun`` (gloo on CPU). The two torch 2.13 workarounds of TORCH_CPU.md are
applied: a per-restart ``PrefixStore`` under the agent's store, and ``destroy_process_group``
then ``os._exit`` after a clean run.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch._C._distributed_c10d import PrefixStore, TCPStore

_CKPT = re.compile(r"^model_iter(\d+)\.pt$")


def log(rank: int, event: str, **fields: object) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    kv = " ".join(f"{k}={v}" for k, v in fields.items())
    os.write(1, f"ts={stamp} rank={rank} event={event} {kv}\n".encode())


def init_process_group(timeout_s: float) -> None:
    timeout = timedelta(seconds=timeout_s)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true":
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        base = TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=timeout,
        )
        dist.init_process_group(
            "gloo",
            store=PrefixStore(f"restart_{restart}", base),
            rank=int(os.environ["RANK"]),
            world_size=int(os.environ["WORLD_SIZE"]),
            timeout=timeout,
        )
    else:
        dist.init_process_group("gloo", init_method="env://", timeout=timeout)


def newest_checkpoint(directory: Path) -> int:
    found = [int(m.group(1)) for p in directory.glob("*.pt") if (m := _CKPT.match(p.name))]
    return max(found, default=0)


def save_checkpoint(directory: Path, iteration: int, state: dict[str, object]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"model_iter{iteration:06d}.pt"
    tmp = directory / f".{path.name}.partial"
    with tmp.open("wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt-dir", type=Path, required=True)
    parser.add_argument("--train-iters", type=int, default=1_000_000)
    parser.add_argument("--ckpt-every", type=int, default=50)
    parser.add_argument("--log-every", type=int, default=1)
    parser.add_argument("--step-sleep", type=float, default=0.01)
    parser.add_argument("--fail-at", type=int, default=0, help="raise at this iteration (0: never)")
    parser.add_argument("--fail-rank", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()

    torch.set_num_threads(1)
    init_process_group(args.timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    log(rank, "start", world=world, host=os.environ.get("SLURMD_NODENAME", "local"))
    log(
        rank,
        "config",
        train_iters=args.train_iters,
        ckpt_every=args.ckpt_every,
        log_every=args.log_every,
        lr=0.05,
    )
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=0)
    chosen = torch.tensor([newest_checkpoint(args.ckpt_dir) if rank == 0 else 0])
    dist.broadcast(chosen, src=0)
    start = int(chosen[0])
    if start:
        path = args.ckpt_dir / f"model_iter{start:06d}.pt"
        model.load_state_dict(torch.load(path)["model"])
        log(rank, "resume", ckpt=path, iter=start)
    params = list(model.parameters())
    last = time.perf_counter()
    for it in range(start + 1, args.train_iters + 1):
        if it == args.fail_at and rank == args.fail_rank:
            raise RuntimeError(f"loss scaler state is inconsistent at iteration {it}")
        gen = torch.Generator().manual_seed(it * 7919 + rank)
        x = torch.randn(64, 16, generator=gen)
        loss = nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True).tanh())
        loss.backward()  # type: ignore[no-untyped-call]
        flat = torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None])
        dist.all_reduce(flat)
        offset = 0
        with torch.no_grad():
            for p in params:
                n = p.numel()
                p -= 0.05 * flat[offset : offset + n].view_as(p) / world
                offset += n
                p.grad = None
        time.sleep(args.step_sleep)
        now = time.perf_counter()
        if it % args.log_every == 0:
            log(rank, "step", iter=it, loss=f"{loss.item():.4f}", dt_ms=f"{(now - last) * 1e3:.1f}")
        last = now
        if rank == 0 and it % args.ckpt_every == 0:
            state = {"iteration": it, "model": model.state_dict()}
            path = save_checkpoint(args.ckpt_dir, it, state)
            log(rank, "ckpt", iter=it, path=path)
    log(rank, "done", iter=args.train_iters)
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    main()
