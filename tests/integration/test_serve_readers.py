"""``trainmedic serve`` with ``[service] source_workers``: its reader processes start with the
first watched jobs, read their logs, and never outlive the service, whether it is stopped
(SIGTERM) or killed (``kill -9``). Real ``trainmedic serve`` processes on the Slurm lab, real
SQLite, jobs registered in the store as another process would."""

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
from trainmedic.sources.reader_process import START
from trainmedic.store import JobSpec, Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(120)]


@pytest.mark.parametrize("end", ["sigterm", "kill -9"])
def test_serve_reads_through_its_readers_and_leaves_none_behind(
    slurm_cluster: SlurmCluster, tmp_path: Path, end: str
) -> None:
    state = tmp_path / "state"
    config = tmp_path / "trainmedic.toml"
    config.write_text(
        f"""
[service]
state_dir = "{state}"
source_workers = 2

[scheduler]
kind = "slurm"
[scheduler.slurm]
slurm_conf = "{slurm_cluster.conf_path}"

[watchdog]
embedded = false
"""
    )
    logs = [tmp_path / f"job{k}.log" for k in range(2)]
    for k, log in enumerate(logs):
        log.write_text(f"2026-12-02T00:00:0{k}.000Z [rank0] node=n0 iter=1 loss=0.5 step_s=0.1\n")
    out = (tmp_path / "serve.log").open("ab")
    serve = subprocess.Popen(
        [sys.executable, "-m", "trainmedic.cli.main", "serve", "--no-api", "--config", str(config)],
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    readers: list[int] = []
    try:
        wait("the database", lambda: (state / "trainmedic.db").exists(), 60)
        store = Store(sqlite_url(str(state / "trainmedic.db")))
        for k, log in enumerate(logs):
            store.register_job(f"9990{k}", "slurm", now=time.time(), spec=JobSpec((str(log),)))
        readers = wait(
            "two readers", lambda: len(r := children(serve.pid, START.encode())) == 2 and r, 60
        )
        # What they read reaches the service: each job's progress is stored.
        wait(
            "progress stored through the readers",
            lambda: all(j.last_iteration == 1 for j in store.list_jobs()),
            60,
        )
        if end == "sigterm":
            serve.send_signal(signal.SIGTERM)
        else:
            serve.kill()
        serve.wait(20)
        wait("the readers gone", lambda: not any(alive(pid) for pid in readers), 30)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
        for pid in readers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
