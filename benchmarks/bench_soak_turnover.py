"""Soak in lock-step: memory and fds of the service while thousands of jobs come and go.

``bench_soak`` runs against the wall clock, so on a starved machine the service falls behind
and its watched set (hence its memory and fds) grows for that reason alone. Here the service
runs on a clock of its own, one second per cycle: each round a quarter of the ``--jobs``
watched jobs end (one in ten FAILED after a fatal line) and their files are deleted, as many
new ones start, every live job gets lines, and the service cycles until the ended ones were
let go. Whatever CPU it gets, the watched set stays ``--jobs`` jobs, so RSS and open fds must
stay flat however many jobs went by.

    .venv/bin/python benchmarks/bench_soak_turnover.py [--jobs 200] [--rounds 60]

Last line: ``jobs_turned_over=… rss_mb_per_1000_jobs=… fds_per_1000_jobs=… ratio_rss_end_vs_warm=…``
(growth per 1,000 jobs between the warm third of the run and its end; the ratio is to the
RSS measured once warm in the same run).
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

FILES_PER_JOB = 4
CRASH = "RuntimeError: CUDA error: an illegal memory access was encountered"


def process_stats() -> tuple[float, int]:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20, len(os.listdir("/proc/self/fd"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200, help="jobs watched at any time")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--lines", type=int, default=20, help="lines per file per round")
    args = parser.parse_args()
    now = [1_000_000.0]
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        config = Config(service=ServiceConfig(state_dir=tmp, unwatch_after_s=2.0))
        store = Store(sqlite_url(str(Path(tmp) / "state.db")))
        sched = FakeScheduler(nodes=[f"n{r}" for r in range(FILES_PER_JOB)])
        service = Service(config, store, sched, clock=lambda: now[0])
        live: collections.deque[str] = collections.deque()
        started = 0

        def start() -> None:
            nonlocal started
            job_id = f"j{started}"
            started += 1
            paths = tuple(str(logs / f"{job_id}.r{r}.log") for r in range(FILES_PER_JOB))
            for path in paths:
                Path(path).write_text("")
            service.register(job_id, JobSpec(log_paths=paths))
            sched.add_job(job_id, [f"n{r}" for r in range(FILES_PER_JOB)])
            live.append(job_id)

        for _ in range(args.jobs):
            start()
        samples: list[tuple[int, float, int]] = []  # (jobs turned over, rss MB, fds)
        cpu0, wall0 = time.process_time(), time.time()
        for round_no in range(args.rounds):
            ending = [live.popleft() for _ in range(args.jobs // 4)]
            for i, job_id in enumerate(ending):
                crash = (started + i) % 10 == 0
                if crash:
                    with (logs / f"{job_id}.r0.log").open("a") as f:
                        f.write(f"[rank0] {CRASH}\n")
                sched.set_state(job_id, JobState.FAILED if crash else JobState.COMPLETED)
                start()
            for job_id in live:
                for r in range(FILES_PER_JOB):
                    with (logs / f"{job_id}.r{r}.log").open("a") as f:
                        f.write(f"[rank{r}] iter={round_no} loss=0.5 step_s=0.01\n" * args.lines)
            for _ in range(4):  # past unwatch_after_s: the ended jobs are let go
                service.cycle()
                now[0] += 1.0
            for job_id in ending:
                sched.jobs.pop(job_id, None)
                for r in range(FILES_PER_JOB):
                    (logs / f"{job_id}.r{r}.log").unlink()
            gc.collect()
            samples.append((started - args.jobs, *process_stats()))
        cpu, wall = time.process_time() - cpu0, time.time() - wall0
        watched = len(service.engine.jobs)
        service.close()
    third = max(1, len(samples) // 3)
    warm, end = samples[third : 2 * third], samples[-third:]
    jobs_between = statistics.fmean(s[0] for s in end) - statistics.fmean(s[0] for s in warm)
    rss_warm = statistics.fmean(s[1] for s in warm)
    rss_end = statistics.fmean(s[1] for s in end)
    fds_warm = statistics.fmean(s[2] for s in warm)
    fds_end = statistics.fmean(s[2] for s in end)
    load = "/".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"load={load} watched={watched} rounds={args.rounds} cpu_s={cpu:.1f} wall_s={wall:.1f}")
    print(f"rss_mb_warm={rss_warm:.1f} rss_mb_end={rss_end:.1f} "
          f"fds_warm={fds_warm:.0f} fds_end={fds_end:.0f}")  # fmt: skip
    per_k = 1000.0 / max(1.0, jobs_between)
    print(
        f"jobs_turned_over={started - args.jobs} "
        f"rss_mb_per_1000_jobs={(rss_end - rss_warm) * per_k:.2f} "
        f"fds_per_1000_jobs={(fds_end - fds_warm) * per_k:.1f} "
        f"ratio_rss_end_vs_warm={rss_end / rss_warm:.3f}"
    )


if __name__ == "__main__":
    main()
