"""trainmedic end to end on the real Slurm lab cluster (munge + slurmctld + 4 slurmd).

The example trainer runs as a 2-node batch job (``--requeue --open-mode=append``; one
torchrun per node, gloo on CPU); the real service runs in this process in a thread, polling
Slurm through ``SlurmScheduler`` over ``LocalRunner`` and tailing the job's output and every
node's kernel log. Every Slurm command the service issues is recorded, so each test states
exactly what trainmedic did to the cluster. Each test puts the shared cluster back (jobs
cancelled, nodes resumed, kernel logs emptied).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.slurm_lab import RecordingRunner, ServiceThread, restore_cluster
from tests.waiting import wait
from tests.workloads.live_offline import compare_with_analyze

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.model import Action, Category, Kind
from trainmedic.core.states import JobState
from trainmedic.demo.slurm_job import (
    AttemptLog,
    TrainerJob,
    attempts_in_log,
    submit_trainer_job,
    trainer_job_spec,
)
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.runner import LocalRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.schedulers.slurm.scontrol import JobDetails
from trainmedic.service.config.loader import default_config
from trainmedic.service.loop import Service
from trainmedic.store import AdviceRecord, AdviceStatus, IncidentRecord, Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(180)]


class Lab:
    """One test's service (own SQLite store) on the session's cluster, and its jobs."""

    def __init__(self, cluster: SlurmCluster, tmp: Path, mode: str, workers: int = 0) -> None:
        self.cluster = cluster
        self.tmp = tmp
        self.runner = RecordingRunner(str(cluster.conf_path))
        self.slurm = SlurmScheduler(self.runner)
        self.store = Store(sqlite_url(str(tmp / "state.db")))
        base = default_config()
        config = dataclasses.replace(
            base,
            service=dataclasses.replace(
                base.service,
                mode=mode,  # type: ignore[arg-type]
                poll_interval_s=0.2,
                source_workers=workers,  # job logs read by reader processes when > 0
            ),
            policy=dataclasses.replace(base.policy, stop_enforcement=True),
            detect=SMALL_JOB,  # the example trainer reports every step and starts in seconds
        )
        kernel = {n: str(cluster.kernel_log(n)) for n in cluster.nodes}
        self.service = Service(
            config, self.store, self.slurm, executor_id="e2e", kernel_logs=kernel
        )
        self.jobs: list[str] = []
        self._running = ServiceThread(self.service)

    # -- the job ------------------------------------------------------------------------

    def submit(self, name: str = "e2e") -> tuple[str, TrainerJob]:
        job = TrainerJob(run_dir=self.tmp / "run", nodes_dir=self.cluster.base / "nodes", name=name)
        job_id = submit_trainer_job(self.cluster, job)
        self.jobs.append(job_id)
        self.service.register(job_id, trainer_job_spec(self.cluster, job), name=name)
        return job_id, job

    def details(self, job_id: str) -> JobDetails:
        return self.slurm.job_details(job_id)

    def attempt(self, job: TrainerJob, number: int) -> AttemptLog:
        return attempts_in_log(job.output).get(number) or AttemptLog(number)

    def steady(self, job: TrainerJob, attempt: int = 0, checkpoints: int = 1) -> AttemptLog:
        """Wait until the attempt trains and has saved ``checkpoints`` checkpoints."""
        return wait(
            f"attempt {attempt} training with {checkpoints} checkpoint(s)",
            lambda: (
                (a := self.attempt(job, attempt)).first_iteration is not None
                and len(a.checkpoints) >= checkpoints
                and a
            ),
            90,
        )

    def inject(self, job: TrainerJob, fault: dict[str, Any]) -> None:
        tmp = job.run_dir / "faults.json.tmp"
        tmp.write_text(json.dumps([fault]))
        tmp.replace(job.run_dir / "faults.json")

    # -- what trainmedic concluded ---------------------------------------------------------

    def incident(self, job_id: str, number: int = 1, timeout: float = 60) -> IncidentRecord:
        """The job's n-th interruption (crash or hang); a straggler report on this shared
        2-core machine is not one of the interruptions these tests inject."""

        def interruptions() -> list[IncidentRecord]:
            return [i for i in self.store.list_incidents(job_id) if i.kind is not Kind.STRAGGLER]

        incidents: list[IncidentRecord] = wait(
            f"incident {number} of job {job_id}",
            lambda: len(found := interruptions()) >= number and found,
            timeout,
        )
        return incidents[number - 1]

    def advice(self, incident: IncidentRecord, final: bool = True) -> AdviceRecord:
        def of_incident() -> AdviceRecord | None:
            for advice in self.store.list_advice(incident.job_id):
                if advice.incident_id == incident.id and (not final or advice.status.is_terminal()):
                    return advice
            return None

        found: AdviceRecord = wait(f"advice for incident {incident.id}", of_incident, 60)
        return found

    def node(self, name: str) -> tuple[bool, str]:
        """(drained, reason) as sinfo shows it."""
        info = {n.name: n for n in self.slurm.poll(()).nodes}[name]
        return info.drain, info.reason

    def close(self) -> None:
        self._running.stop()
        if self.jobs:
            self.cluster.run(["scancel", *self.jobs], check=False)
        restore_cluster(self.cluster)
        self.store.close()


@pytest.fixture
def make_lab(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[Callable[..., Lab]]:
    labs: list[Lab] = []
    restore_cluster(slurm_cluster)

    def _make(mode: str, workers: int = 0) -> Lab:
        labs.append(Lab(slurm_cluster, tmp_path, mode, workers))
        return labs[-1]

    yield _make
    for lab in labs:
        lab.close()


def _running_elsewhere(lab: Lab, job_id: str, bad: str, attempt: int) -> JobDetails:
    details: JobDetails = wait(
        f"job {job_id} RUNNING again without {bad}",
        lambda: (
            (d := lab.details(job_id)).state is JobState.RUNNING
            and d.attempt >= attempt
            and bad not in d.nodes
            and d
        ),
        40,
    )
    return details


def _resumed_from_checkpoint(lab: Lab, job: TrainerJob, failed: AttemptLog, number: int) -> None:
    """The next attempt loads the newest checkpoint the failed one saved and logs the
    iteration after it first (the trainer's resume semantics: checkpoint N, next N + 1)."""
    resumed = wait(
        f"attempt {number} progress",
        lambda: (a := lab.attempt(job, number)).first_iteration is not None and a,
        60,
    )
    saved = lab.attempt(job, failed.attempt).checkpoints
    assert resumed.resumed_from == max(saved), (resumed.resumed_from, saved)
    assert resumed.first_iteration == max(saved) + 1


# -- 1, 2: Xid 79 -------------------------------------------------------------------------


def test_xid79_excludes_and_drains_the_node_then_resumes_from_checkpoint(make_lab) -> None:  # type: ignore[no-untyped-def]
    lab = make_lab("action")
    job_id, job = lab.submit()
    before = lab.steady(job)
    good, bad = lab.details(job_id).nodes
    lab.inject(job, {"id": "xid-1", "type": "xid79", "node": bad})

    incident = lab.incident(job_id)
    assert (incident.kind, incident.category) == (Kind.CRASH, Category.GPU_HARDWARE)
    assert incident.implicated.nodes == (bad,)
    check = compare_with_analyze(lab.store, job_id, incident)
    assert check.same, check  # live = offline on the same files
    advice = lab.advice(incident)
    assert advice.action is Action.RESTART_EXCLUDING and advice.status is AdviceStatus.CONVERGED
    assert advice.exclude_nodes == (bad,) and advice.drain_nodes == (bad,)
    # held, excluded, released: the exact scontrol sequence, once
    mutations = [c for c in lab.runner.changes if job_id in c or f"JobId={job_id}" in c]
    assert mutations == [
        ("scontrol", "requeuehold", job_id),
        ("scontrol", "update", f"JobId={job_id}", f"ExcNodeList={bad}"),
        ("scontrol", "release", job_id),
    ], mutations
    (drain,) = lab.runner.issued("scontrol", "update", f"NodeName={bad}")
    assert "State=DRAIN" in drain
    assert lab.details(job_id).excluded_nodes == (bad,)
    drained, reason = lab.node(bad)
    assert drained and reason.startswith("trainmedic:")
    assert lab.node(good) == (False, "")

    again = _running_elsewhere(lab, job_id, bad, attempt=1)
    assert again.attempt == 1 and len(again.nodes) == 2
    _resumed_from_checkpoint(lab, job, lab.attempt(job, 0), 1)
    assert lab.attempt(job, 1).nodes.isdisjoint({bad})
    assert before.checkpoints[0] <= lab.attempt(job, 1).resumed_from  # type: ignore[operator]


def test_xid79_in_monitor_mode_only_records_advice(make_lab) -> None:  # type: ignore[no-untyped-def]
    lab = make_lab("monitor")
    job_id, job = lab.submit()
    lab.steady(job)
    bad = lab.details(job_id).nodes[1]
    lab.inject(job, {"id": "xid-2", "type": "xid79", "node": bad})

    incident = lab.incident(job_id)
    assert incident.category is Category.GPU_HARDWARE and incident.implicated.nodes == (bad,)
    advice = lab.advice(incident, final=False)
    assert advice.status is AdviceStatus.RECORDED
    assert advice.action is Action.RESTART_EXCLUDING and advice.exclude_nodes == (bad,)
    time.sleep(2)  # several more service cycles
    assert lab.runner.changes == []
    details = lab.details(job_id)
    assert not details.held and details.excluded_nodes == () and details.attempt == 0
    assert not any(lab.node(n)[0] for n in lab.cluster.nodes)
    assert lab.store.get_advice(advice.id).applied_at is None


# -- 3: deterministic application error ------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 1], ids=["read-in-loop", "reader-process"])
def test_app_error_gets_one_confirmation_retry_then_is_stopped(make_lab, workers: int) -> None:  # type: ignore[no-untyped-def]
    lab = make_lab("action", workers)
    job_id, job = lab.submit()
    first = lab.steady(job)
    nodes = lab.details(job_id).nodes
    # Ten iterations past a checkpoint (every 25) at least 20 iterations ahead: the retry
    # resumes from that checkpoint and logs progress before it meets the error again.
    at_iter = (((first.last_iteration or 0) + 20) // 25 + 1) * 25 + 10
    lab.inject(job, {"id": "app-1", "type": "app_error", "error": "key", "at_iter": at_iter})

    confirm = lab.incident(job_id, 1)
    assert (confirm.kind, confirm.category) == (Kind.CRASH, Category.APPLICATION)
    check = compare_with_analyze(lab.store, job_id, confirm)
    assert check.same, check  # live = offline on the same files
    retry = lab.advice(confirm)
    # the confirmation retry runs on other nodes (4 nodes, 2 needed) and drains nothing
    assert retry.action is Action.RESTART_EXCLUDING and retry.status is AdviceStatus.CONVERGED
    assert retry.exclude_nodes == nodes and retry.drain_nodes == ()
    stop = lab.incident(job_id, 2, timeout=90)
    assert stop.attempt == 1 and stop.category is Category.APPLICATION
    check = compare_with_analyze(lab.store, job_id, stop)
    assert check.same, check  # on its last attempt's lines, although the log holds two
    stopped = lab.advice(stop)
    assert stopped.action is Action.STOP and stopped.status is AdviceStatus.CONVERGED
    # scancel ends it, unless the failing batch script got there first (FAILED): either way
    # it stays stopped, never requeued again
    assert lab.runner.issued("scancel", job_id) == [("scancel", job_id)]
    time.sleep(1)
    final = lab.details(job_id)
    assert final.state in (JobState.CANCELLED, JobState.FAILED) and final.attempt == 1
    # the retry resumed before the fault and met it at the same iteration
    attempts = attempts_in_log(job.output)
    assert attempts[0].last_iteration == attempts[1].last_iteration == at_iter - 1
    assert (attempts[1].resumed_from or 0) < at_iter
    assert attempts[1].nodes.isdisjoint(nodes)
    assert sum("KeyError" in line for line in attempts[1].lines) >= 1
    assert lab.runner.issued("scontrol", "requeuehold", job_id) == [
        ("scontrol", "requeuehold", job_id)
    ]
    assert not any("State=DRAIN" in c for c in lab.runner.changes)
    assert not any(lab.node(n)[0] for n in lab.cluster.nodes)


# -- 4: hang --------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 1], ids=["read-in-loop", "reader-process"])
def test_hang_is_requeued_and_resumes(make_lab, workers: int) -> None:  # type: ignore[no-untyped-def]
    lab = make_lab("action", workers)
    job_id, job = lab.submit()
    lab.steady(job)
    lab.inject(job, {"id": "hang-1", "type": "hang", "rank": 3})

    incident = lab.incident(job_id)
    assert incident.kind is Kind.HANG and incident.attempt == 0
    advice = lab.advice(incident)
    assert advice.action is Action.RESTART and advice.status is AdviceStatus.CONVERGED
    assert lab.runner.issued("scontrol", "requeuehold", job_id) == [
        ("scontrol", "requeuehold", job_id)
    ]
    wait("job RUNNING again", lambda: lab.details(job_id).state is JobState.RUNNING, 40)
    _resumed_from_checkpoint(lab, job, lab.attempt(job, 0), 1)
    resumed = lab.attempt(job, 1)
    wait(
        "progress in attempt 1",
        lambda: (lab.attempt(job, 1).last_iteration or 0) >= (resumed.first_iteration or 0) + 20,
        30,
    )


# -- 5: node death --------------------------------------------------------------------------


def test_node_death_is_node_hardware_and_not_requeued_twice(make_lab) -> None:  # type: ignore[no-untyped-def]
    lab = make_lab("action")
    job_id, job = lab.submit()
    lab.steady(job)
    dead = lab.details(job_id).nodes[1]
    lab.cluster.run(["scontrol", "update", f"NodeName={dead}", "State=DOWN", "Reason=test"])

    incident = lab.incident(job_id)
    assert incident.category is Category.NODE_HARDWARE
    assert dead in incident.implicated.nodes
    lab.advice(incident)
    again = _running_elsewhere(lab, job_id, dead, attempt=1)
    assert again.attempt == 1  # Slurm's own requeue, not a second one on top
    _resumed_from_checkpoint(lab, job, lab.attempt(job, 0), 1)
    assert len(lab.runner.issued("scontrol", "requeuehold", job_id)) <= 1
    assert lab.details(job_id).attempt == 1


# -- 6: the watchdog releases a hold whose service died --------------------------------------


def test_watchdog_releases_a_job_held_by_a_dead_service(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    restore_cluster(slurm_cluster)
    state = tmp_path / "state"
    state.mkdir()
    config = tmp_path / "trainmedic.toml"
    config.write_text(
        f'[service]\nstate_dir = "{state}"\n\n[scheduler]\nkind = "slurm"\n\n'
        f'[scheduler.slurm]\nslurm_conf = "{slurm_cluster.conf_path}"\n'
    )
    job_id = slurm_cluster.sbatch(
        ["--requeue", "-N1", f"--output={tmp_path / 'sleep.out'}", "--wrap", "sleep 600"]
    )
    slurm = SlurmScheduler(LocalRunner(str(slurm_cluster.conf_path)))
    watchdog: subprocess.Popen[bytes] | None = None
    try:
        wait("job RUNNING", lambda: slurm.job_details(job_id).state is JobState.RUNNING, 20)
        # What the executor does before requeuing: record the hold, then hold. It "dies" here.
        store = Store(sqlite_url(str(state / "trainmedic.db")))
        store.record_hold(job_id, held_at=time.time(), by="e2e-service-killed")
        slurm_cluster.run(["scontrol", "requeuehold", job_id])
        held_at = time.monotonic()
        assert slurm.job_details(job_id).held
        argv = [sys.executable, "-m", "trainmedic.cli.main", "watchdog", "--config", str(config)]
        with (tmp_path / "watchdog.log").open("wb") as log:
            watchdog = subprocess.Popen(
                [*argv, "--timeout", "5", "--interval", "0.5"], stdout=log, stderr=log
            )
        wait("the watchdog's release", lambda: not slurm.job_details(job_id).held, 15)
        released = time.monotonic() - held_at
        assert 5 <= released <= 5 + 4, released
        assert store.open_holds() == []
        wait("job RUNNING again", lambda: slurm.job_details(job_id).state is JobState.RUNNING, 20)
        assert slurm.job_details(job_id).attempt == 1
        store.close()
    finally:
        if watchdog is not None:
            watchdog.terminate()
            watchdog.wait(timeout=10)
        slurm_cluster.run(["scancel", job_id], check=False)


# -- 7: another owner's drain reason stays ---------------------------------------------------


def test_foreign_drain_reason_is_left_alone(make_lab) -> None:  # type: ignore[no-untyped-def]
    lab = make_lab("action")
    job_id, job = lab.submit()
    lab.steady(job)
    bad = lab.details(job_id).nodes[1]
    lab.cluster.run(
        ["scontrol", "update", f"NodeName={bad}", "State=DRAIN", "Reason=NHC: bad disk"]
    )
    lab.inject(job, {"id": "xid-7", "type": "xid79", "node": bad})

    incident = lab.incident(job_id)
    assert incident.category is Category.GPU_HARDWARE and incident.implicated.nodes == (bad,)
    advice = lab.advice(incident)
    assert advice.status is AdviceStatus.CONVERGED and advice.exclude_nodes == (bad,)
    assert f"drain:{bad}" in advice.steps_done
    assert lab.runner.issued("scontrol", "update", f"NodeName={bad}") == []
    assert lab.node(bad) == (True, "NHC: bad disk")
    (event,) = [e for e in lab.store.node_history(bad) if e.reason.startswith("drain skipped")]
    assert not event.drained
    _running_elsewhere(lab, job_id, bad, attempt=1)
    assert bad in lab.details(job_id).excluded_nodes
