"""``trainmedic serve`` starts and supervises its watchdog, which fails open on the real Slurm
lab cluster: a held job is released from the hold file after the database is deleted, a
killed watchdog is started again, and after a ``kill -9`` of the service its watchdog still
releases what is held. Real ``trainmedic serve`` processes, real SQLite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.integration.serve_helpers import alive, children
from tests.waiting import wait

from trainmedic.lab import SlurmCluster
from trainmedic.service.holdfile import HoldFile

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(180)]


def _log_text(tmp: Path) -> str:
    return (tmp / "serve.log").read_text(errors="replace").split("watchdog exited", 1)[-1]


def _held_job(cluster: SlurmCluster, tmp: Path, holds: HoldFile, delay: float = 0.0) -> str:
    """A job held as a cut-short requeue leaves it, recorded only in the hold file (due
    ``delay`` seconds later than a hold taken now)."""
    job = cluster.sbatch(["--hold", f"--output={tmp}/held.out", "--wrap", "sleep 60"])
    holds.add(job, held_at=time.time() + delay, by="killed-service")
    return job


def test_serve_supervises_a_watchdog_that_fails_open(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    config = tmp_path / "trainmedic.toml"
    config.write_text(
        f"""
[service]
state_dir = "{state}"

[scheduler]
kind = "slurm"
[scheduler.slurm]
slurm_conf = "{slurm_cluster.conf_path}"

[watchdog]
timeout_s = 2.0
interval_s = 0.5
"""
    )
    log = (tmp_path / "serve.log").open("ab")
    serve = subprocess.Popen(
        [sys.executable, "-m", "trainmedic.cli.main", "serve", "--no-api", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    jobs: list[str] = []
    watchdogs: list[int] = []
    try:
        (first,) = wait("the watchdog child", lambda: children(serve.pid, b"watchdog"), 60)
        watchdogs.append(first)
        holds = HoldFile(state / "holds.json")

        # The database is deleted under the running service: the watchdog works from the file.
        wait("the database", lambda: (state / "trainmedic.db").exists())
        for name in ("trainmedic.db", "trainmedic.db-wal", "trainmedic.db-shm"):
            (state / name).unlink(missing_ok=True)
        jobs.append(_held_job(slurm_cluster, tmp_path, holds))
        wait("the held job released", lambda: slurm_cluster.job_state(jobs[-1]) == "RUNNING")
        assert holds.holds() == []

        # A watchdog that dies is started again.
        os.kill(first, signal.SIGKILL)
        second = wait(
            "a new watchdog child",
            lambda: [p for p in children(serve.pid, b"watchdog") if p != first],
            60,
        )[0]
        watchdogs.append(second)

        # kill -9 of the service with a hold open: its watchdog lives on, releases the job,
        # then exits (no process left behind once nothing is held).
        wait("the new watchdog acting", lambda: "releasing" in _log_text(tmp_path), 60)
        jobs.append(_held_job(slurm_cluster, tmp_path, holds, delay=3.0))
        serve.kill()
        serve.wait(10)
        assert alive(second) and slurm_cluster.job_state(jobs[-1]) == "PENDING"
        wait(
            "released after the service died",
            lambda: slurm_cluster.job_state(jobs[-1]) == "RUNNING",
        )
        wait("the orphaned watchdog gone", lambda: not alive(second))
    finally:
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            serve.wait(15)
        for pid in watchdogs:  # the orphaned watchdog this test's service started
            if alive(pid):
                os.kill(pid, signal.SIGTERM)
        if jobs:
            slurm_cluster.run(["scancel", *jobs], check=False)
        log.close()
