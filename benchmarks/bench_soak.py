"""Soak: many watched jobs coming and going, a heavy aggregate log rate, for a while.

The real service loop (job-log followers, engine, SQLite store) runs in this process against
the in-memory scheduler; a writer *process* appends rank-prefixed progress lines to every
active job's 4 log files, following a schedule fixed up front: jobs start and end all the
time, one in ten ends by crashing (a fatal line, then the scheduler shows FAILED). Measured:

* lines the writer wrote vs progress observations the service made: nothing may be lost;
* crash detection latency (the crash is written and shown -> the incident is recorded);
* RSS and open file descriptors over the run: flat once warm (finished jobs are unwatched,
  their files closed);
* the service's line rate, and the ratio to a bare ``read()``+``split`` of the same files in
  the same run (the least any watcher must do).

    .venv/bin/python benchmarks/bench_soak.py [--jobs 1000] [--rate 100000] [--seconds 60]

Last line: ``lines_per_s=… lost=… crash_detect_p95_s=… rss_growth_pct=… fd_growth=…
ratio_vs_bare_read=…``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.model import Kind
from trainmedic.core.observations import Progress
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

FILES_PER_JOB = 4
TICK_S = 0.5
CRASH = "RuntimeError: CUDA error: an illegal memory access was encountered"


@dataclass(frozen=True)
class Slot:
    job_id: str
    start: float  # seconds after t0
    end: float
    crash: bool


def schedule(jobs: int, seconds: float, seed: int = 7) -> list[Slot]:
    """``jobs`` concurrent jobs at any time: each runs a random while and is replaced."""
    rng = random.Random(seed)
    slots: list[Slot] = []
    for lane in range(jobs):
        t = 0.0
        n = 0
        while t < seconds:
            length = rng.uniform(seconds / 4, seconds)
            slots.append(Slot(f"{lane}-{n}", t, min(seconds, t + length), rng.random() < 0.1))
            t += length
            n += 1
    return slots


def writer(base: str, slots: list[Slot], rate: int, t0: float, out: str) -> None:
    """Append ``rate`` lines/s spread over the active jobs' files; crash lines at the end."""
    written: dict[str, int] = {}
    crashed: dict[str, float] = {}
    iteration: dict[str, int] = {}
    while True:
        now = time.time() - t0
        active = [s for s in slots if s.start <= now < s.end]
        if now >= max(s.end for s in slots):
            break
        per_file = max(1, int(rate * TICK_S / max(1, len(active) * FILES_PER_JOB)))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        for slot in active:
            first = iteration.get(slot.job_id, 0)
            for rank in range(FILES_PER_JOB):
                lines = "".join(
                    f"{stamp} [rank{rank}] node=n{rank} iter={first + i} loss=0.5 step_s=0.01\n"
                    for i in range(1, per_file + 1)
                )
                with open(Path(base) / f"{slot.job_id}.r{rank}.log", "a") as f:
                    f.write(lines)
            iteration[slot.job_id] = first + per_file
            written[slot.job_id] = written.get(slot.job_id, 0) + per_file * FILES_PER_JOB
        for slot in slots:
            if slot.crash and slot.job_id not in crashed and slot.end <= now and slot.start < now:
                with open(Path(base) / f"{slot.job_id}.r0.log", "a") as f:
                    f.write(f"{stamp} [rank0] node=n0 {CRASH}\n")
                crashed[slot.job_id] = time.time()
        time.sleep(max(0.0, TICK_S - (time.time() - t0 - now)))
    Path(out).write_text(json.dumps({"written": written, "crashed": crashed}))


def bare_read_rate(files: list[Path]) -> float:
    """Lines per second a bare read+split of the same bytes manages (the baseline)."""
    started, lines = time.process_time(), 0
    for path in files:
        with path.open("rb") as f:
            lines += len(f.read().split(b"\n"))
    return lines / max(1e-9, time.process_time() - started)


def process_stats() -> tuple[int, int]:
    rss = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return rss, len(os.listdir("/proc/self/fd"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000, help="jobs watched at any time")
    parser.add_argument("--rate", type=int, default=100_000, help="aggregate lines/s")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    slots = schedule(args.jobs, args.seconds)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        logs = base / "logs"
        logs.mkdir()
        config = Config(service=ServiceConfig(state_dir=tmp, unwatch_after_s=2.0))
        store = Store(sqlite_url(str(base / "state.db")))
        sched = FakeScheduler(nodes=[f"n{i}" for i in range(FILES_PER_JOB)])
        service = Service(config, store, sched)
        seen: dict[str, int] = {}
        observe = service.engine.observe_all

        def counting(observations: list, now: float) -> None:  # type: ignore[type-arg]
            for obs in observations:
                if isinstance(obs, Progress):
                    seen[obs.job_id] = seen.get(obs.job_id, 0) + 1
            observe(observations, now)

        service.engine.observe_all = counting  # type: ignore[method-assign]
        t0 = time.time() + 1.0
        result = base / "writer.json"
        proc = multiprocessing.Process(
            target=writer, args=(str(logs), slots, args.rate, t0, str(result))
        )
        proc.start()
        registered: set[str] = set()
        ended: set[str] = set()
        detected: dict[str, float] = {}
        samples: list[tuple[float, int, int]] = []
        cycles = 0
        cpu0 = time.process_time()
        while proc.is_alive() or time.time() < t0 + args.seconds + 5:
            now = time.time() - t0
            for slot in slots:
                if slot.job_id not in registered and slot.start <= now:
                    paths = tuple(
                        str(logs / f"{slot.job_id}.r{r}.log") for r in range(FILES_PER_JOB)
                    )
                    for p in paths:
                        Path(p).touch()
                    service.register(slot.job_id, JobSpec(log_paths=paths))
                    sched.add_job(slot.job_id, [f"n{r}" for r in range(FILES_PER_JOB)])
                    registered.add(slot.job_id)
                if slot.job_id not in ended and slot.end <= now and slot.job_id in registered:
                    state = JobState.FAILED if slot.crash else JobState.COMPLETED
                    sched.set_state(slot.job_id, state)
                    ended.add(slot.job_id)
            decisions = service.cycle().decisions
            for decision in decisions:
                if decision.finding.verdict.kind is Kind.CRASH:
                    detected.setdefault(decision.finding.job_id, time.time())
            cycles += 1
            if cycles % 10 == 0:
                samples.append((time.time(), *process_stats()))
            if not proc.is_alive() and len(detected) >= sum(
                s.crash for s in slots if s.end < args.seconds
            ):
                break
        cpu = time.process_time() - cpu0
        proc.join()
        report = json.loads(result.read_text())
        written: dict[str, int] = report["written"]
        lost = sum(max(0, n - seen.get(job, 0)) for job, n in written.items())
        crashes = report["crashed"]
        latencies = sorted(detected[j] - t for j, t in crashes.items() if j in detected)
        missed = [j for j in crashes if j not in detected]
        total = sum(written.values())
        # Flat: the second quarter of the run (warm) against the last one, jobs still coming
        # and going in both.
        quarter = max(1, len(samples) // 4)
        warm, last = samples[quarter : 2 * quarter], samples[-quarter:]
        rss_growth = 100.0 * (
            statistics.median(s[1] for s in last) / statistics.median(s[1] for s in warm) - 1
        )
        fd_growth = statistics.median(s[2] for s in last) - statistics.median(s[2] for s in warm)
        bare = bare_read_rate(sorted(logs.iterdir()))
        rate = total / max(1e-9, cpu)
        p95 = latencies[int(0.95 * (len(latencies) - 1))] if latencies else float("nan")
        print(f"jobs={len(slots)} concurrent={args.jobs} files={len(slots) * FILES_PER_JOB}")
        print(
            f"written_lines={total} observed={sum(seen.values())} "
            f"wall_s={args.seconds} cycles={cycles}"
        )
        print(f"crashes={len(crashes)} detected={len(latencies)} missed={len(missed)}")
        print(f"rss_mb_warm={statistics.median(s[1] for s in warm) / 2**20:.1f} "
              f"rss_mb_end={statistics.median(s[1] for s in last) / 2**20:.1f} "
              f"fds_warm={statistics.median(s[2] for s in warm)} "
              f"fds_end={statistics.median(s[2] for s in last)}")  # fmt: skip
        print(
            f"lines_per_s={total / args.seconds:.0f} service_lines_per_cpu_s={rate:.0f} "
            f"lost={lost} crash_detect_p95_s={p95:.2f} rss_growth_pct={rss_growth:.1f} "
            f"fd_growth={fd_growth:.0f} ratio_vs_bare_read={rate / bare:.4f}"
        )


if __name__ == "__main__":
    main()
