"""Finished jobs are not revived, on the real Slurm lab cluster (munge + slurmctld + 4 slurmd).

Slurm requeues a finished batch job as readily as a running one (``scontrol requeuehold`` on a
COMPLETED or CANCELLED job puts it back to PENDING), so a late advice for a job that ended,
or that its user cancelled with ``scancel``, would bring it back to life. The real service
loop runs here over ``SlurmScheduler``; every Slurm command that changes something is
recorded, so each test states exactly what trainmedic did.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import pytest
from tests.slurm_lab import RecordingRunner

from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.service.config.loader import default_config
from trainmedic.service.loop import Service
from trainmedic.store import AdviceMode, AdviceStatus, JobSpec, Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(120)]

CRASH = Verdict(True, Kind.CRASH, Category.APPLICATION, 0.6)
LOOP = "while true; do echo step; sleep 0.2; done"


class Watched:
    """The real service (action mode, own SQLite store) watching one job of the lab."""

    def __init__(self, cluster: SlurmCluster, tmp: Path, job_id: str, out: Path) -> None:
        self.runner = RecordingRunner(str(cluster.conf_path))
        self.store = Store(sqlite_url(str(tmp / "state.db")))
        base = default_config()
        config = dataclasses.replace(
            base,
            service=dataclasses.replace(base.service, mode="action", state_dir=str(tmp)),
        )
        self.service = Service(config, self.store, SlurmScheduler(self.runner))
        self.service.register(job_id, JobSpec(log_paths=(str(out),)))
        self.job_id = job_id

    def late_finding(self) -> int:
        """A crash finding stored as the loop stores one (restart advice, action mode)."""
        stored = self.store.record_decision(
            self.job_id,
            0,
            CRASH,
            Advice(Action.RESTART, "crash"),
            mode=AdviceMode.ACTION,
            now=time.time(),
            detected_at=time.time(),
        )
        return stored.advice.id

    def cycles(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.service.cycle()
            time.sleep(0.2)


def _submit(cluster: SlurmCluster, tmp: Path, wrap: str) -> tuple[str, Path]:
    out = tmp / "job.out"
    job = cluster.sbatch(["--requeue", "--open-mode=append", f"--output={out}", "--wrap", wrap])
    return job, out


def _wait_state(cluster: SlurmCluster, job: str, state: str, timeout: float = 30) -> None:
    cluster.wait_for(f"job {job} {state}", lambda: cluster.job_state(job) == state, timeout)


def test_a_job_its_user_cancelled_is_recorded_never_restarted(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job, out = _submit(slurm_cluster, tmp_path, LOOP)
    try:
        watched = Watched(slurm_cluster, tmp_path, job, out)
        _wait_state(slurm_cluster, job, "RUNNING")
        watched.cycles(1.0)
        slurm_cluster.run(["scancel", job])  # the user's decision, not trainmedic's
        _wait_state(slurm_cluster, job, "CANCELLED")
        advice_id = watched.late_finding()  # e.g. the cancel line read as a crash
        watched.cycles(3.0)
        advice = watched.store.get_advice(advice_id)
        assert advice.status is AdviceStatus.ABANDONED
        assert "cancelled by its user" in advice.note
        assert watched.runner.changes == [], "no requeue, hold or release of the job"
        time.sleep(1.0)
        assert slurm_cluster.job_state(job) == "CANCELLED"
        assert watched.store.get_job(job).state == "CANCELLED"  # type: ignore[union-attr]
    finally:
        slurm_cluster.run(["scancel", job], check=False)


def test_a_completed_job_is_not_revived(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job, out = _submit(slurm_cluster, tmp_path, "echo done")
    try:
        watched = Watched(slurm_cluster, tmp_path, job, out)
        _wait_state(slurm_cluster, job, "COMPLETED")
        advice_id = watched.late_finding()
        watched.cycles(2.0)
        advice = watched.store.get_advice(advice_id)
        assert advice.status is AdviceStatus.ABANDONED and "COMPLETED" in advice.note
        assert watched.runner.changes == []
        assert slurm_cluster.job_state(job) == "COMPLETED"
    finally:
        slurm_cluster.run(["scancel", job], check=False)


def test_a_job_slurm_no_longer_knows_is_abandoned_after_one_check(
    slurm_cluster: SlurmCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gone = "987654"  # past MinJobAge: squeue and scontrol no longer know it
    watched = Watched(slurm_cluster, tmp_path, gone, tmp_path / "gone.out")
    advice_id = watched.late_finding()
    with caplog.at_level(logging.INFO):
        watched.cycles(3.0)
    assert watched.store.get_advice(advice_id).status is AdviceStatus.ABANDONED
    assert watched.runner.changes == []
    about = [r for r in caplog.records if f"advice {advice_id}" in r.getMessage()]
    assert len(about) == 1, [r.getMessage() for r in about]


def test_the_adapter_refuses_to_requeue_a_job_that_ended(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Between the executor's poll and its requeue the user may cancel: the adapter looks
    again right before ``requeuehold``."""
    from trainmedic.core.errors import JobNotRequeueable

    job, _ = _submit(slurm_cluster, tmp_path, LOOP)
    try:
        _wait_state(slurm_cluster, job, "RUNNING")
        slurm_cluster.run(["scancel", job])
        _wait_state(slurm_cluster, job, "CANCELLED")
        runner = RecordingRunner(str(slurm_cluster.conf_path))
        with pytest.raises(JobNotRequeueable):
            SlurmScheduler(runner).requeue(job, ())
        with pytest.raises(JobNotRequeueable):
            SlurmScheduler(runner).requeue("987654", ())
        assert runner.changes == []
        assert slurm_cluster.job_state(job) == "CANCELLED"
    finally:
        slurm_cluster.run(["scancel", job], check=False)
