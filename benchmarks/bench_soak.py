"""Soak: many watched jobs coming and going, a heavy aggregate log rate, for a while.

The real service (job-log followers, engine, SQLite store) runs in this process against the
in-memory scheduler, one ``cycle()`` every ``poll_interval_s`` as ``Service.run`` does; a
writer *process* (``soak_load``) appends rank-prefixed progress lines to every active job's 4
log files. Jobs start and end all the time, one in ten ends by crashing (a fatal line, then
the scheduler shows FAILED); an ended job's files are deleted a moment later, and the
scheduler forgets it as Slurm does. Measured:

* lines written vs progress lines the service read and classified (a ``Progress``, or a
  ``ProgressRun`` standing for that many lines): nothing may be lost;
* crash detection latency (the crash is written and shown -> the incident is recorded);
* RSS and open fds (this process's and the reader processes' together, with
  ``--source-workers``), sampled every second by a thread of their own: after the warm-up (the
  first quarter), the second half of the run against the first half, and the slope;
* the service's own CPU (inside ``register``/``cycle``, plus its reader processes') per
  line, and its ratio to two
  same-run baselines over the same bytes: a bare ``read()`` + newline count, and
  ``LogFollower`` alone (reading and splitting, no parsing, detection or store);
* whether the rate was sustained: the writer's late ticks, the service's late cycles, and how
  long the service took to catch up once the writer stopped.

    .venv/bin/python benchmarks/bench_soak.py [--jobs 1000] [--rate 100000] [--seconds 60]
        [--source-workers 1]   # [service] source_workers: 0 reads the logs in the loop

Last line: ``lines_per_s=… lost=… crash_detect_p95_s=… rss_growth_pct=… fd_growth=…
service_us_per_line=… ratio_vs_bare_read=… ratio_vs_follower=…``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from soak_load import FILES_PER_JOB, bare_read_cpu, follower_cpu, log_path, schedule, writer
from trainmedic.core.model import Kind
from trainmedic.core.observations import Observation, Progress, ProgressRun
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

UNWATCH_AFTER_S = 2.0
DELETE_AFTER_S = 4.0  # an ended job's files are removed, and the scheduler forgets it


def process_stats(readers: list[int]) -> tuple[int, int]:
    """RSS and open fds of this process and the service's reader processes, together."""
    rss = fds = 0
    for pid in ("self", *map(str, readers)):
        try:
            pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue  # a reader that ended between the listing and the read
        rss += pages * os.sysconf("SC_PAGE_SIZE")
    return rss, fds


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (t, y), per minute."""
    mean_t = statistics.fmean(t for t, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    var = sum((t - mean_t) ** 2 for t, _ in points) or 1e-9
    return 60.0 * sum((t - mean_t) * (y - mean_y) for t, y in points) / var


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000, help="jobs watched at any time")
    parser.add_argument("--rate", type=int, default=100_000, help="aggregate lines/s")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--job-seconds", type=float, default=20.0, help="mean job life")
    parser.add_argument("--poll", type=float, default=0.5, help="service poll_interval_s")
    parser.add_argument(
        "--source-workers", type=int, default=1, help="[service] source_workers (0: in-loop)"
    )
    args = parser.parse_args()
    slots = schedule(args.jobs, args.seconds, args.job_seconds)
    by_start = sorted(slots, key=lambda s: s.start)
    by_end = sorted(slots, key=lambda s: s.end)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        logs = base / "logs"
        logs.mkdir()
        service_config = ServiceConfig(
            state_dir=tmp,
            unwatch_after_s=UNWATCH_AFTER_S,
            poll_interval_s=args.poll,
            source_workers=args.source_workers,
        )
        store = Store(sqlite_url(str(base / "state.db")))
        sched = FakeScheduler(nodes=[f"n{i}" for i in range(FILES_PER_JOB)])
        service = Service(Config(service=service_config), store, sched)
        seen: dict[str, int] = {}
        observe = service.engine.observe_all

        def counting(observations: list[Observation], now: float) -> None:
            for obs in observations:
                # A run stands for that many lines, each read and found a progress line.
                if isinstance(obs, Progress | ProgressRun):
                    lines = len(obs) if isinstance(obs, ProgressRun) else 1
                    seen[obs.job_id] = seen.get(obs.job_id, 0) + lines
            observe(observations, now)

        service.engine.observe_all = counting  # type: ignore[method-assign]
        t0 = time.time() + 2.0
        result = base / "writer.json"
        proc = multiprocessing.Process(
            target=writer, args=(str(logs), slots, args.rate, t0, str(result))
        )
        proc.start()
        detected: dict[str, float] = {}
        samples: list[tuple[float, int, int, int]] = []  # (t, rss, fds, watched jobs)
        started = ended = deleted = cycles = late = 0
        service_cpu = 0.0
        stop_sampling = threading.Event()
        sampler = threading.Thread(
            target=sample_every_second, args=(service, t0, samples, stop_sampling), daemon=True
        )
        sampler.start()
        writer_done_at: float | None = None
        crashes_due = sum(s.crash for s in slots)
        while True:
            tick = time.time()
            now = tick - t0
            cpu0 = time.process_time()
            while started < len(by_start) and by_start[started].start <= now:
                slot = by_start[started]
                paths = tuple(str(log_path(logs, slot.job_id, r)) for r in range(FILES_PER_JOB))
                service.register(slot.job_id, JobSpec(log_paths=paths))
                sched.add_job(slot.job_id, [f"n{r}" for r in range(FILES_PER_JOB)])
                started += 1
            while ended < len(by_end) and by_end[ended].end <= now:
                slot = by_end[ended]
                sched.set_state(slot.job_id, JobState.FAILED if slot.crash else JobState.COMPLETED)
                ended += 1
            for decision in service.cycle().decisions:
                if decision.finding.verdict.kind is Kind.CRASH:
                    detected.setdefault(decision.finding.job_id, time.time())
            service_cpu += time.process_time() - cpu0
            cycles += 1
            while deleted < len(by_end) and by_end[deleted].end + DELETE_AFTER_S <= now:
                job_id = by_end[deleted].job_id
                sched.jobs.pop(job_id, None)
                for r in range(FILES_PER_JOB):
                    log_path(logs, job_id, r).unlink(missing_ok=True)
                deleted += 1
            if writer_done_at is None and not proc.is_alive():
                writer_done_at = time.time()
                stop_sampling.set()  # the load is over: what follows is the catching up
            if writer_done_at is not None and (
                (len(detected) >= crashes_due and cycles_idle(service))
                or time.time() > writer_done_at + 60
            ):
                break
            spare = args.poll - (time.time() - tick)
            late += spare < 0
            time.sleep(max(0.0, spare))
        caught_up_s = time.time() - (writer_done_at or time.time())
        reader_cpu = service.reader_processes()[1]  # the readers' CPU is the service's too
        proc.join()
        report = json.loads(result.read_text())
        files = sorted(logs.iterdir())
        bare_cpu, bare_lines = bare_read_cpu(files)
        follow_cpu, follow_lines = follower_cpu(files)
    written: dict[str, int] = report["written"]
    lost = sum(max(0, n - seen.get(job, 0)) for job, n in written.items())
    latencies = sorted(detected[j] - t for j, t in report["crashed"].items() if j in detected)
    total = sum(written.values())
    warm = [s for s in samples if s[0] >= args.seconds / 4]
    half = len(warm) // 2
    first, second = warm[:half], warm[half:]
    rss1 = statistics.median(s[1] for s in first) / 2**20
    rss2 = statistics.median(s[1] for s in second) / 2**20
    fds1 = statistics.median(s[2] for s in first)
    fds2 = statistics.median(s[2] for s in second)
    rss_slope = slope_per_min([(s[0], s[1] / 2**20) for s in warm])
    fd_slope = slope_per_min([(s[0], float(s[2])) for s in warm])
    service_cpu += reader_cpu
    us_per_line = 1e6 * service_cpu / max(1, total)
    bare_us = 1e6 * bare_cpu / max(1, bare_lines)
    follow_us = 1e6 * follow_cpu / max(1, follow_lines)
    p95 = latencies[int(0.95 * (len(latencies) - 1))] if latencies else float("nan")
    load = Path("/proc/loadavg").read_text().split()[:3]
    watched = statistics.median(s[3] for s in warm)
    p50 = latencies[len(latencies) // 2] if latencies else float("nan")
    print(f"load={'/'.join(load)} jobs={len(slots)} concurrent={args.jobs} "
          f"files={len(slots) * FILES_PER_JOB} watched_median={watched}")  # fmt: skip
    print(f"written_lines={total} observed={sum(seen.values())} wall_s={args.seconds} "
          f"writer_cpu_s={report['cpu_s']:.1f} writer_late_ticks={report['late_ticks']}/"
          f"{report['ticks']} service_cpu_s={service_cpu:.1f} (readers {reader_cpu:.1f}, "
          f"source_workers={args.source_workers}) cycles={cycles} "
          f"late_cycles={late} caught_up_s={caught_up_s:.1f}")  # fmt: skip
    print(f"crashes={len(report['crashed'])} detected={len(latencies)} "
          f"crash_detect_p50_s={p50:.2f}")  # fmt: skip
    print(f"rss_mb_first_half={rss1:.1f} rss_mb_second_half={rss2:.1f} "
          f"rss_slope_mb_per_min={rss_slope:.2f} fds_first_half={fds1} "
          f"fds_second_half={fds2} fd_slope_per_min={fd_slope:.1f}")  # fmt: skip
    # Open fds beyond the watched jobs' files: flat unless something is held that should not be.
    extra1 = statistics.median(s[2] - FILES_PER_JOB * s[3] for s in first)
    extra2 = statistics.median(s[2] - FILES_PER_JOB * s[3] for s in second)
    print(f"fds_beyond_watched_files_first_half={extra1} second_half={extra2}")
    print(f"bare_read_us_per_line={bare_us:.3f} follower_us_per_line={follow_us:.3f}")
    print(
        f"lines_per_s={total / args.seconds:.0f} lost={lost} crash_detect_p95_s={p95:.2f} "
        f"rss_growth_pct={100 * (rss2 / rss1 - 1):.1f} fd_growth={fds2 - fds1:.0f} "
        f"service_cpu_share={service_cpu / args.seconds:.2f} "
        f"service_us_per_line={us_per_line:.2f} ratio_vs_bare_read={us_per_line / bare_us:.0f} "
        f"ratio_vs_follower={us_per_line / follow_us:.1f}"
    )


def sample_every_second(
    service: Service, t0: float, out: list[tuple[float, int, int, int]], stop: threading.Event
) -> None:
    """RSS, fds and watched jobs once a second from ``t0``, however long a cycle takes."""
    time.sleep(max(0.0, t0 - time.time()))
    while not stop.wait(1.0):
        try:
            watched = len(service.engine.jobs)
        except RuntimeError:  # the loop changed the jobs while they were counted
            watched = out[-1][3] if out else 0
        out.append((time.time() - t0, *process_stats(service.reader_processes()[0]), watched))


def cycles_idle(service: Service) -> bool:
    """Every job the writer fed has been let go: the service read all there was."""
    return not service.engine.jobs


if __name__ == "__main__":
    main()
