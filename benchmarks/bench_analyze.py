"""Throughput of the signature matcher and of the full ``analyze`` on a large, realistic log.

Generates a log of ``--lines`` lines (default 1,000,000) in a temporary directory: mostly
healthy Megatron / DeepSpeed / HF iteration lines with ``[rankN]:`` prefixes and timestamps,
NCCL INFO chatter, checkpoint saves and warnings, with a real failure near the end (a CUDA
error on one rank, watchdog timeouts on the others, torchrun's failure table, srun errors).

Prints, one per line: matcher lines/s (a), matcher lines/s on lines whose shapes never repeat
(the prefilter without its memo), naive lines/s (b: every regex of every signature on a sample
of lines, extrapolated), full analyze lines/s (c), and last exactly::

    lines_per_s=<matcher> analyze_lines_per_s=<full> ratio_vs_naive=<matcher / naive>

Rates are lines per CPU second of this process (``time.process_time``): "on one core", and
steady when other work shares the machine. Run:
``.venv/bin/python benchmarks/bench_analyze.py [--lines N]``. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import importlib
import math
import random
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from trainmedic.core.signatures.matcher import Matcher, default_matcher

NODES = [f"gpu-a{n:02d}" for n in range(1, 5)]
RANKS = 32


def _healthy_line(rng: random.Random, i: int) -> str:
    """One line of the kinds that make up the bulk of a training job's output."""
    second = 1_700_000_000 + i // 40
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second)) + f",{i % 1000:03d}"
    rank = rng.randrange(RANKS)
    roll = rng.random()
    if roll < 0.40:
        it = i // 20 + 1
        return (
            f"[rank{RANKS - 1}]:[{stamp}] iteration {it:>8}/  500000 | consumed samples: "
            f"{it * 512:>12} | elapsed time per iteration (ms): {rng.uniform(780, 840):.1f} | "
            f"learning rate: {rng.uniform(1e-5, 3e-4):.6E} | global batch size:   512 | "
            f"lm loss: {rng.uniform(1.8, 2.6):.6E} | loss scale: 1.0 | "
            f"grad norm: {rng.uniform(0.2, 1.5):.3f} | number of skipped iterations:   0 | "
            f"number of nan iterations:   0 |"
        )
    if roll < 0.75:
        node = NODES[rank // 8]
        pid = 40_000 + rank
        detail = rng.choice(
            [
                f"Channel {rng.randrange(32):02d}/32 :    0   1   2   3   4   5   6   7",
                f"Channel {rng.randrange(32):02d}/0 : {rank}[{rank % 8}] -> {(rank + 1) % RANKS}"
                f"[{(rank + 1) % 8}] [send] via NET/IB/{rank % 8}/GDRDMA",
                f"Trees [0] {rank + 1}/-1/-1->{rank}->{rank - 1} [1] -1/-1/-1->{rank}->{rank - 1}",
                f"comm 0x{rng.randrange(1 << 40):x} rank {rank} nranks {RANKS} cudaDev "
                f"{rank % 8} busId {rng.choice(['18000', '3b000', '86000'])} - Init COMPLETE",
                "Connected all rings",
                "Connected all trees",
                f"NCCL_IB_HCA set to mlx5_{rank % 8}",
            ]
        )
        return f"{node}:{pid}:{pid + 170} [{rank % 8}] NCCL INFO {detail}"
    if roll < 0.88:
        step = i // 20
        return (
            f"[{stamp}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, "
            f"lr=[{rng.uniform(1e-5, 3e-4):.8f}], mom=[(0.9, 0.95)]"
        )
    if roll < 0.95:
        return (
            f"{{'loss': {rng.uniform(0.5, 2.5):.4f}, 'grad_norm': {rng.uniform(0.1, 3):.4f}, "
            f"'learning_rate': {rng.uniform(1e-6, 2e-5):.4e}, 'epoch': {i / 1e6:.2f}}}"
        )
    if roll < 0.985:
        done = i % 1000
        return (
            f"[rank{rank}]: Epoch {i // 100000}: {done // 10:3d}%|{'█' * (done // 100):<10}| "
            f"{done}/1000 [01:{done % 60:02d}<02:11, {rng.uniform(2, 4):.2f}it/s, "
            f"loss={rng.uniform(0.4, 0.9):.3f}]"
        )
    if roll < 0.995:
        return f"[rank0]:[{stamp}] saving checkpoint at iteration {i // 20:>8} to /ckpt/run42"
    return (
        f"[rank{rank}]:[W{stamp[5:7]}{stamp[8:10]} {stamp[11:19]}.000000 {40000 + rank} "
        "torch/distributed/distributed_c10d.py:2789] Warning: barrier() using device under "
        "current context. You can specify device_id in init_process_group."
    )


FAILURE = [
    "[rank13]:[E1114 22:13:20.412 ProcessGroupNCCL.cpp:1536] CUDA error: an illegal memory "
    "access was encountered",
    "[rank13]: CUDA kernel errors might be asynchronously reported at some other API call.",
    "[rank13]: Traceback (most recent call last):",
    '[rank13]:   File "/workspace/pretrain_gpt.py", line 244, in <module>',
    "[rank13]: RuntimeError: CUDA error: an illegal memory access was encountered",
    *(
        f"[rank{r}]:[E1114 22:23:20.000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum=88121, OpType=ALLREDUCE, NumelIn=1, "
        f"NumelOut=1, Timeout(ms)=600000) ran for 600371 milliseconds before timing out."
        for r in range(RANKS)
        if r != 13
    ),
    "[rank0]:[E1114 22:23:20.1 ProcessGroupNCCL.cpp:630] [Rank 0] To avoid data "
    "inconsistency, we are taking the entire process down.",
    "W1114 22:23:25.000000 39990 torch/distributed/elastic/multiprocessing/api.py:890] "
    "Sending process 40001 closing signal SIGTERM",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "  host      : gpu-a02",
    "  rank      : 13 (local_rank: 5)",
    "  exitcode  : 1 (pid: 40013)",
    "srun: error: gpu-a02: task 1: Exited with exit code 1",
]


def generate(path: Path, lines: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    body = [_healthy_line(rng, i) for i in range(lines - len(FAILURE) - 200)]
    tail = [_healthy_line(rng, lines + i) for i in range(200)]
    out = body + FAILURE + tail
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return out


def time_matcher(matcher: Matcher, lines: list[str]) -> tuple[float, int]:
    match = matcher.match
    start = time.process_time()
    hits = sum(1 for line in lines if match(line))
    return len(lines) / (time.process_time() - start), hits


def time_naive(matcher: Matcher, sample: list[str]) -> float:
    regexes = [re.compile(p) for s in matcher.catalogue.signatures for p in s.patterns]
    start = time.process_time()
    for line in sample:
        for regex in regexes:
            regex.search(line)
    return len(sample) / (time.process_time() - start)


def find_analyze() -> Callable[[Path], object] | None:
    """The full pipeline entry point if present (another part of the project provides it)."""
    try:
        module = importlib.import_module("trainmedic.offline.analyze")
    except ImportError:
        return None
    single = getattr(module, "analyze_path", None)
    if callable(single):
        return lambda path: single(path)
    many = getattr(module, "analyze_paths", None)
    if callable(many):
        return lambda path: many([path])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--naive-sample", type=int, default=5_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainmedic-bench-") as tmp:
        path = Path(tmp) / "job.log"
        lines = generate(path, args.lines)
        print(f"log_lines={len(lines)} log_bytes={path.stat().st_size}")
        matcher = Matcher(default_matcher().catalogue)  # fresh: its memo starts empty
        lines_per_s, hit_lines = time_matcher(matcher, lines)
        print(f"matcher_lines_per_s={lines_per_s:.0f} lines_with_hits={hit_lines}")
        rng = random.Random(11)
        letters = "bcghjkmpqtvwxyz"  # a digit-free tag makes every shape new to the memo
        unique = [f"{line} #{''.join(rng.choices(letters, k=10))}" for line in lines[::50]]
        unique_lps, _ = time_matcher(Matcher(matcher.catalogue), unique)
        print(f"matcher_unique_shapes_lines_per_s={unique_lps:.0f}")
        step = max(1, len(lines) // args.naive_sample)
        naive_lps = time_naive(matcher, lines[::step])
        print(f"naive_lines_per_s={naive_lps:.0f}")
        analyze = find_analyze()
        analyze_lps = math.nan
        if analyze is not None:
            start = time.process_time()
            analyze(path)
            analyze_lps = len(lines) / (time.process_time() - start)
        print(f"analyze_lines_per_s={analyze_lps:.0f}")
    ratio = lines_per_s / naive_lps
    print(
        f"lines_per_s={lines_per_s:.0f} analyze_lines_per_s={analyze_lps:.0f}"
        f" ratio_vs_naive={ratio:.1f}"
    )


if __name__ == "__main__":
    main()
