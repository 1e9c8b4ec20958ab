"""A workload trainmedic was not written for, on the real Slurm lab cluster, as a new user
would run it: tests/workloads/kvtrainer.py (its own ``key=value`` log format, its own resume
and checkpoint lines, tracebacks on stderr, torchrun's failure table) as a 2-node batch job
that opts in through its comment only; the service discovers it (``[scheduler] kind =
"slurm"``), reads its output and error files and acts (action mode).

A deterministic application error (rank 1 raises at a fixed iteration in every attempt) must
get one retry, then a stop that is carried out (the job's own ``stop_enforcement``, the
config's being off), never a restart loop; and the live verdict must equal ``trainmedic
analyze``'s on the job's files.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.slurm_lab import RecordingRunner, ServiceThread, restore_cluster
from tests.waiting import wait
from tests.workloads.kvjob import KvJob, sbatch_args
from tests.workloads.live_offline import compare_with_analyze

from trainmedic.core.model import Action, Category, Kind
from trainmedic.core.states import JobState
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.service.config.loader import default_config
from trainmedic.service.loop import Service
from trainmedic.store import IncidentRecord, Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(300)]


class DiscoveringService:
    """The service as deployed for Slurm: it finds opted-in jobs itself."""

    def __init__(self, cluster: SlurmCluster, tmp: Path) -> None:
        self.runner = RecordingRunner(str(cluster.conf_path))
        self.slurm = SlurmScheduler(self.runner)
        self.store = Store(sqlite_url(str(tmp / "state.db")))
        base = default_config()
        template = str(cluster.base / "nodes" / "{node}" / "kern.log")
        config = dataclasses.replace(
            base,
            service=dataclasses.replace(base.service, mode="action", poll_interval_s=0.2),
            # On this shared 2-core machine torchrun takes up to 5 s to notice a dead rank
            # and end the others: a 5 s hang floor would call the teardown a hang.
            detect=dataclasses.replace(base.detect, hang_floor_s=30.0),
            scheduler=dataclasses.replace(
                base.scheduler,
                kind="slurm",
                slurm=dataclasses.replace(
                    base.scheduler.slurm,
                    slurm_conf=str(cluster.conf_path),
                    kernel_log_template=template,
                    discovery_interval_s=1.0,
                ),
            ),
        )
        assert config.policy.stop_enforcement is False  # only the job opts in to stops
        self.service = Service(config, self.store, self.slurm, executor_id="e2e-workload")
        self._running = ServiceThread(self.service)

    def incidents(self, job_id: str) -> list[IncidentRecord]:
        return [i for i in self.store.list_incidents(job_id) if i.kind is not Kind.STRAGGLER]

    def close(self) -> None:
        self._running.stop()
        self.store.close()


@pytest.fixture
def service(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[DiscoveringService]:
    restore_cluster(slurm_cluster, timeout=60)
    running = DiscoveringService(slurm_cluster, tmp_path)
    yield running
    running.close()


def test_a_deterministic_error_of_another_authors_trainer_is_retried_once_then_stopped(
    slurm_cluster: SlurmCluster, service: DiscoveringService, tmp_path: Path
) -> None:
    job = KvJob(
        run_dir=tmp_path / "kv",
        fail_at=180,
        ckpt_every=50,
        opt_in={"stop_enforcement": True},
    )
    job_id = slurm_cluster.sbatch(sbatch_args(job))
    kernel = {n: slurm_cluster.kernel_log(n) for n in slurm_cluster.nodes}
    try:
        first = wait("the first incident", lambda: service.incidents(job_id)[:1], 150)[0]
        assert (first.attempt, first.kind, first.category) == (
            0,
            Kind.CRASH,
            Category.APPLICATION,
        ), first.basis
        assert first.root_cause is not None and "RuntimeError" in first.root_cause.text
        # live = offline on the files as they are when the first attempt is judged
        check = compare_with_analyze(service.store, job_id, first, kernel_logs=kernel)
        assert check.same, check

        second = wait("the second incident", lambda: service.incidents(job_id)[1:2], 150)[0]
        assert (second.attempt, second.category) == (1, Category.APPLICATION)
        advice = {a.incident_id: a for a in service.store.list_advice(job_id)}
        assert advice[first.id].action in (Action.RESTART, Action.RESTART_EXCLUDING)
        stop = wait(
            "the stop carried out",
            lambda: (
                (a := service.store.get_advice(advice[second.id].id)).status.is_terminal() and a
            ),
            60,
        )
        assert stop.action is Action.STOP, stop.basis
        assert "same failure at iteration 179" in stop.basis, stop.basis
        assert service.runner.issued("scancel", job_id) == [("scancel", job_id)]
        # the service read what the job printed on stdout and stderr (found in Slurm's record)
        spec = service.store.get_job(job_id).spec  # type: ignore[union-attr]
        assert set(spec.log_paths) == {str(job.output), str(job.errors)}
        # stopped for good: no third attempt, one requeue in all
        time.sleep(20)
        final = service.slurm.job_details(job_id)
        assert final.state in (JobState.CANCELLED, JobState.FAILED) and final.attempt == 1
        assert len(service.runner.issued("scontrol", "requeuehold", job_id)) == 1
        assert len(service.incidents(job_id)) == 2

        # each attempt resumed past the resume line: 1 then 151 (checkpoint 150)
        attempts = {a.attempt: a for a in service.store.list_attempts(job_id)}
        assert attempts[0].last_iteration == attempts[1].last_iteration == 179
        assert attempts[1].first_iteration == 151

        check = compare_with_analyze(service.store, job_id, kernel_logs=kernel)
        assert check.incident.id == second.id and check.same, check
    finally:
        slurm_cluster.run(["scancel", job_id], check=False)
