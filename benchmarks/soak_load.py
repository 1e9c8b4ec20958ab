"""The load side of ``bench_soak``: the job schedule, the log writer process, the baselines.

The writer runs in a process of its own so that its CPU is not the service's: every tick it
appends one batched write of rank-prefixed progress lines to each active job's 4 log files
(one ``open``/``write``/``close`` per file per tick), and at a crashing job's end one fatal
line. It reports what it wrote per job, when each crash line was written, its own CPU, and how
far behind its schedule it fell (a writer that cannot keep up lowers the rate, not the count).
"""

from __future__ import annotations

import json
import os
import random
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from trainmedic.sources.follower import LogFollower

FILES_PER_JOB = 4
TICK_S = 0.25
CRASH = "RuntimeError: CUDA error: an illegal memory access was encountered"


@dataclass(frozen=True)
class Slot:
    job_id: str
    start: float  # seconds after t0
    end: float
    crash: bool


def schedule(jobs: int, seconds: float, job_seconds: float, seed: int = 7) -> list[Slot]:
    """``jobs`` lanes, each running one job after another (lives of 0.5-1.5 x ``job_seconds``,
    the first cut short so that lanes do not all turn over together): ``jobs`` concurrent
    jobs at any time, and jobs ending and starting all through the run; one in ten crashes."""
    rng = random.Random(seed)
    slots: list[Slot] = []
    for lane in range(jobs):
        t, n = 0.0, 0
        while t < seconds:
            length = rng.uniform(0.5 * job_seconds, 1.5 * job_seconds)
            if n == 0:
                length *= rng.random()
            end = min(seconds, t + length)
            slots.append(Slot(f"{lane}-{n}", t, end, end < seconds and rng.random() < 0.1))
            t, n = end, n + 1
    return slots


def log_path(base: Path, job_id: str, rank: int) -> Path:
    return base / f"{job_id}.r{rank}.log"


def writer(base: str, slots: list[Slot], rate: int, t0: float, out: str) -> None:
    """Append ``rate`` lines/s in all, spread over the active jobs' files, until the last
    slot ends; a crashing job's rank 0 gets the fatal line at its end."""
    logs = Path(base)
    by_start = sorted(slots, key=lambda s: s.start)
    horizon = max(s.end for s in slots)
    active: dict[str, Slot] = {}
    written: dict[str, int] = {}
    crashed: dict[str, float] = {}
    iteration: dict[str, int] = {}
    nxt, ticks, late_ticks = 0, 0, 0
    time.sleep(max(0.0, t0 - time.time()))
    while (now := time.time() - t0) < horizon:
        while nxt < len(by_start) and by_start[nxt].start <= now:
            active[by_start[nxt].job_id] = by_start[nxt]
            nxt += 1
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        for slot in [s for s in active.values() if s.end <= now]:
            del active[slot.job_id]
            if slot.crash:
                with log_path(logs, slot.job_id, 0).open("a") as f:
                    f.write(f"{stamp} [rank0] node=n0 {CRASH}\n")
                crashed[slot.job_id] = time.time()
        # This tick's steps (a line in each of a job's files), shared out exactly: some jobs
        # get one more, a different few each tick, so the aggregate is ``rate`` lines/s.
        base, extra = divmod(round(rate * TICK_S / FILES_PER_JOB), max(1, len(active)))
        for k, job_id in enumerate(active):
            per_file = base + ((k + ticks * extra) % len(active) < extra)
            if per_file == 0:
                continue
            first = iteration.get(job_id, 0)
            for rank in range(FILES_PER_JOB):
                head = f"{stamp} [rank{rank}] node=n{rank} iter="
                numbers = range(first + 1, first + per_file + 1)
                lines = "".join(f"{head}{i} loss=0.5 step_s=0.01\n" for i in numbers)
                fd = os.open(log_path(logs, job_id, rank), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                os.write(fd, lines.encode())
                os.close(fd)
            iteration[job_id] = first + per_file
            written[job_id] = written.get(job_id, 0) + per_file * FILES_PER_JOB
        ticks += 1
        spare = (ticks * TICK_S) - (time.time() - t0)
        late_ticks += spare < 0
        time.sleep(max(0.0, spare))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = {
        "written": written,
        "crashed": crashed,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "ticks": ticks,
        "late_ticks": late_ticks,
    }
    Path(out).write_text(json.dumps(report))


def bare_read_cpu(files: list[Path]) -> tuple[float, int]:
    """(CPU seconds, lines) of a bare ``read()`` + ``split`` of the files: the least any
    watcher must do with these bytes."""
    started, lines = time.process_time(), 0
    for path in files:
        with path.open("rb") as f:
            lines += f.read().count(b"\n")
    return time.process_time() - started, lines


def follower_cpu(files: list[Path]) -> tuple[float, int]:
    """(CPU seconds, lines) of ``LogFollower`` alone over the files: the service's reading,
    without parsing, detection or the store."""
    started, lines = time.process_time(), 0
    for path in files:
        follower = LogFollower(path)
        while batch := follower.poll():
            lines += len(batch)
        follower.close()
    return time.process_time() - started, lines
