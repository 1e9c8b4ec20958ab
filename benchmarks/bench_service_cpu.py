"""The service's own CPU while it watches a 4-rank DDP job (goal: <= 5 % of one core).

Starts the example trainer (2 virtual nodes x 2 ranks, gloo on CPU) on the local backend,
runs the real service loop (log follower, kernel-log followers, checkpoint watcher, engine,
SQLite store, executor) in this process, and measures this process's CPU time (workers are
child processes and not counted) over a window. Baseline, same run, same job: the least any
watcher must do, a bare ``LogFollower`` reading the job's log at the same poll interval.

    .venv/bin/python benchmarks/bench_service_cpu.py [--seconds 20]

Last line: ``service_cpu_pct=<x> job_it_per_s=<r> tail_cpu_pct=<b> ratio_vs_tail=<q>``
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from trainmedic.schedulers.local.scheduler import LocalJobSpec, LocalScheduler
from trainmedic.service.config import default_config
from trainmedic.service.loop import Service
from trainmedic.sources.follower import LogFollower
from trainmedic.store import JobSpec, Store, sqlite_url

NODES = ("node1", "node2", "node3", "node4")


def cpu_over(seconds: float) -> float:
    start_cpu, start = time.process_time(), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (time.process_time() - start_cpu) / (time.monotonic() - start)


def tail_loop(path: Path, interval: float, stop: threading.Event) -> None:
    follower = LogFollower(path)
    while not stop.is_set():
        follower.poll()
        stop.wait(interval)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--step-sleep", type=float, default=0.002)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        sched = LocalScheduler(base / "cluster", nodes=NODES, grace_s=1.0)
        store = Store(sqlite_url(str(base / "state.db")))
        service = Service(
            default_config(),
            store,
            sched,
            kernel_logs={n: str(sched.kernel_log(n)) for n in NODES},
        )
        run = base / "run"
        command = (
            "-m", "trainmedic.demo.trainer.cli", "--run-dir", str(run), "--iters", "10000000",
            "--ckpt-every", "100", "--step-sleep", str(args.step_sleep),
        )  # fmt: skip
        job_id = sched.submit(LocalJobSpec("bench", 2, 2, command, str(run)))
        service.register(
            job_id,
            JobSpec(log_paths=(str(run / "job.out"),), checkpoint_dir=str(run / "checkpoints")),
        )
        stop = threading.Event()
        loop = threading.Thread(target=service.run, args=(stop,), daemon=True)
        loop.start()
        try:
            deadline = time.time() + 120
            while (store.get_job(job_id).last_iteration or 0) < 100:  # type: ignore[union-attr]
                if time.time() > deadline:
                    raise SystemExit("the job never made progress")
                time.sleep(0.2)
            stop.set()
            loop.join(10)
            tail_stop = threading.Event()
            tail = threading.Thread(
                target=tail_loop, args=(run / "job.out", 0.5, tail_stop), daemon=True
            )
            tail.start()
            baseline = cpu_over(args.seconds)
            tail_stop.set()
            tail.join(5)
            stop = threading.Event()
            loop = threading.Thread(target=service.run, args=(stop,), daemon=True)
            loop.start()
            i0, t0 = store.get_job(job_id).last_iteration or 0, time.time()  # type: ignore[union-attr]
            watching = cpu_over(args.seconds)
            i1 = store.get_job(job_id).last_iteration or 0  # type: ignore[union-attr]
            rate = (i1 - i0) / (time.time() - t0)
        finally:
            stop.set()
            loop.join(10)
            sched.shutdown(cancel_jobs=True)
            store.close()
    print(f"baseline, a bare tail of the job log: {baseline:.2f} % of a core")
    print(f"the service watching a 4-rank job at {rate:.0f} it/s: {watching:.2f} % of a core")
    ratio = watching / baseline if baseline > 0 else float("inf")
    print(
        f"service_cpu_pct={watching:.2f} job_it_per_s={rate:.0f} "
        f"tail_cpu_pct={baseline:.2f} ratio_vs_tail={ratio:.1f}"
    )


if __name__ == "__main__":
    main()
