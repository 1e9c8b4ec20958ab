"""The service loop over hostile input from every side at once (the real Slurm adapter on
recorded sinfo output through the FakeRunner seam, a real SQLite store, real files): each bad
record is skipped and counted, every good one still reaches the store, and the loop goes on."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.schedulers.slurm.runner import FakeRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.service.config.sections import (
    Config,
    SchedulerConfig,
    ServiceConfig,
    SlurmConfig,
    WatchConfig,
)
from trainmedic.service.loop import Service
from trainmedic.store import Store, sqlite_url

DATA = Path(__file__).parent.parent / "data" / "slurm"
OPT_IN = '{"trainmedic": {"stop_enforcement": true}}'


def _job(job_id: int, out: Path, **extra: object) -> dict[str, object]:
    job: dict[str, object] = {
        "job_id": job_id,
        "job_state": "RUNNING",
        "nodes": "node1",
        "standard_output": str(out),
        "comment": OPT_IN,
        "partition": "debug",
        "user_name": "alice",
        "name": f"train{job_id}",
    }
    job.update(extra)
    return job


@pytest.mark.timeout(120)
def test_the_loop_survives_hostile_input_and_still_watches_the_good_jobs(tmp_path: Path) -> None:
    good_log, fifo, numbers = tmp_path / "good.out", tmp_path / "fifo.out", tmp_path / "num.out"
    good_log.write_text("iter=5 loss=0.5 step_s=0.1\n")
    os.mkfifo(fifo)
    numbers.write_text(
        "iter=" + "9" * 5000 + " loss=0.5 step_s=0.1\n"
        f"iter={2**63} loss=0.5 step_s=0.1\n" + "1%|" * 20_000 + "\niter=9 loss=0.4 step_s=0.1\n"
    )
    jobs = [
        _job(1, good_log),
        _job(2, fifo),  # a FIFO as the job's output: must not block the loop
        _job(3, numbers),
        _job(4, good_log, comment='{"trainmedic": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        _job(5, good_log, nodes="a[0-99999]b[0-99999]"),  # ten billion names
        _job(6, good_log, exit_code={"signal": []}, job_state="FAILED"),
        {"job_state": "RUNNING"},
    ]
    runner = FakeRunner()
    runner.add(["squeue", "--json"], json.dumps({"jobs": jobs}))
    runner.add(["sinfo", "--json"], (DATA / "sinfo_idle_alloc_drain_down.json").read_text())
    runner.add(["scontrol", "-o", "show", "job"], "JobId=1 JobName=x Comment=a JobState=COMPLETED")
    config = Config(
        service=ServiceConfig(state_dir=str(tmp_path)),
        watch=WatchConfig(partitions=("nothing",)),
        scheduler=SchedulerConfig(kind="slurm", slurm=SlurmConfig(discovery_interval_s=0.0)),
    )
    store = Store(sqlite_url(str(tmp_path / "tm.db")))
    service = Service(config, store, SlurmScheduler(runner), executor_id="t")
    before = BAD_INPUT.snapshot()
    started = time.monotonic()
    for _ in range(3):
        service.cycle()
    assert time.monotonic() - started < 60
    assert sorted(j.job_id for j in store.list_jobs()) == ["1", "2", "3"]
    assert store.get_job("1").last_iteration == 5  # type: ignore[union-attr]
    assert store.get_job("3").last_iteration == 9  # type: ignore[union-attr]
    counted = {k: BAD_INPUT.snapshot()[k] - before[k] for k in BadInput}
    assert counted[BadInput.SLURM_JOB] >= 3  # jobs 5, 6 and the one without id, every poll
    assert counted[BadInput.JOB_COMMENT] >= 1  # job 4: watched by neither comment nor config
    assert counted[BadInput.NOT_REGULAR_FILE] == 1  # the FIFO, once
    assert counted[BadInput.NUMBER] >= 2
    assert counted[BadInput.SCONTROL_RECORD] >= 1  # the scontrol record missing its fields
