"""A plain-torch DDP loop with a JSON-lines logger (structlog's JSONRenderer style).

Rank 0 logs one JSON object per line on stdout: ``{"timestamp": ..., "level": "info",
"event": "train_step", "step": 120, "loss": 0.53, ...}`` every ``--log-every`` steps, plus
start, resume and checkpoint events. trainmedic knows no such format by default: the job
declares it with ``progress_regex`` in its opt-in comment (the test does), or it is watched
without progress (crashes from the scheduler state) and told how to declare it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common


def log(event: str, **fields: Any) -> None:
    if dist.get_rank() != 0:
        return
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    record = {"timestamp": stamp, "level": "info", "event": event, **fields}
    common.write_line(json.dumps(record))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--ckpt-every", type=int, default=100)
    parser.add_argument("--ckpt-dir", type=Path, required=True)
    args = parser.parse_args()
    timeout = timedelta(seconds=float(os.environ.get("WORKLOAD_COMM_TIMEOUT", "600")))
    dist.init_process_group("gloo", timeout=timeout)
    log("run_start", world_size=dist.get_world_size(), restart=common.attempt())
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    args.ckpt_dir.mkdir(parents=True, exist_ok=True)
    latest = args.ckpt_dir / "latest.pt"
    step = 0
    if latest.exists():
        state = torch.load(latest, weights_only=True)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = int(state["step"])
        log("checkpoint_restored", step=step, path=str(latest))
    if dist.get_rank() == 0:
        common.trace("start", resumed_from=step)
    hook = common.FaultHook()
    gen = torch.Generator().manual_seed(dist.get_rank())
    while step < args.steps:
        hook.at_step(step + 1)
        started = time.perf_counter()
        x = torch.randn(8, 16, generator=gen)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(common.step_sleep())
        step += 1
        if dist.get_rank() == 0:
            common.trace("step", iter=step)
        if step % args.log_every == 0:
            took = time.perf_counter() - started
            log("train_step", step=step, loss=round(loss.item(), 5), step_time_s=round(took, 4))
        if step % args.ckpt_every == 0:
            dist.barrier()
            if dist.get_rank() == 0:
                buffer = io.BytesIO()
                state = {"model": model.module.state_dict(), "optimizer": opt.state_dict()}
                torch.save({**state, "step": step}, buffer)
                common.atomic_write(latest, buffer.getvalue())
                common.trace("checkpoint", iter=step)
            log("checkpoint_saved", step=step, path=str(latest))
    log("run_end", step=step)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)  # torch 2.13 + gloo: a clean exit sometimes aborts in teardown
