"""SlurmScheduler against the real lab cluster (munge + slurmctld + 4 slurmd, cred_expire=10).

Each test puts back what it changed (nodes resumed, its jobs cancelled): the cluster is
shared by the session.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainmedic.core.states import JobState, NodeState
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.runner import LocalRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

LOOP = """#!/bin/bash
while true; do
  echo "node=$SLURMD_NODENAME restart=${SLURM_RESTART_COUNT:-0}"
  sleep 0.5
done
"""


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster) -> SlurmScheduler:
    return SlurmScheduler(LocalRunner(slurm_conf=str(slurm_cluster.conf_path)))


@pytest.fixture
def submit(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[object]:
    """``submit(*sbatch_args) -> (job_id, output_path)``; cancels its jobs afterwards."""
    script = tmp_path / "loop.sh"
    script.write_text(LOOP)
    submitted: list[str] = []

    def _submit(*args: str) -> tuple[str, Path]:
        out = tmp_path / f"job-{len(submitted)}.out"
        job = slurm_cluster.sbatch(
            ["--requeue", "--open-mode=append", f"--output={out}", *args, str(script)]
        )
        submitted.append(job)
        return job, out

    yield _submit
    if submitted:
        slurm_cluster.run(["scancel", *submitted], check=False)


def _wait_state(slurm: SlurmScheduler, job: str, state: JobState, timeout: float = 30) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        snap = slurm.poll([job])
        if snap.jobs and snap.jobs[0].state is state:
            return time.monotonic() - t0
        time.sleep(0.2)
    raise AssertionError(f"job {job} not {state} within {timeout} s: {slurm.poll([job])}")


def test_requeue_excluding_a_node_restarts_elsewhere(slurm: SlurmScheduler, submit) -> None:  # type: ignore[no-untyped-def]
    job, out = submit("-N2", "-w", "node1,node2")
    _wait_state(slurm, job, JobState.RUNNING, 15)
    (running,) = slurm.poll([job]).jobs
    assert running.nodes == ("node1", "node2") and running.attempt == 0
    assert running.stdout_path == str(out)

    t0 = time.monotonic()
    plan = slurm.requeue_excluding(job, ["node2"])
    issued = time.monotonic() - t0
    details = slurm.job_details(job)
    assert plan.exclude == ("node2",) and details.excluded_nodes == ("node2",)
    assert plan.required == ("node1",) and details.required_nodes == ("node1",)
    assert details.attempt == 1 and not details.held  # requeued, exclusion set, released
    _wait_state(slurm, job, JobState.RUNNING, 30)
    back = time.monotonic() - t0
    (again,) = slurm.poll([job]).jobs
    assert "node2" not in again.nodes and len(again.nodes) == 2 and again.attempt == 1
    print(f"\nrequeue commands issued in {issued:.2f} s; RUNNING again after {back:.1f} s")
    assert back < 20  # cred_expire=10: Slurm's floor is about 11 s
    time.sleep(1.2)
    lines = out.read_text().splitlines()
    assert lines[0].startswith("node=node1 restart=0")  # appended, not truncated
    assert any(ln.endswith("restart=1") and "node2" not in ln for ln in lines)


def test_requeue_finishes_one_cut_short_after_its_hold(  # type: ignore[no-untyped-def]
    slurm: SlurmScheduler, slurm_cluster: SlurmCluster, submit
) -> None:
    """A service killed between ``requeuehold`` and its release leaves the job held at the new
    attempt; the restarted executor's requeue must set the exclusion and release it without
    requeuing it again."""
    job, _ = submit("-N2", "-w", "node1,node2")
    _wait_state(slurm, job, JobState.RUNNING, 15)
    slurm_cluster.run(["scontrol", "requeuehold", job])  # the killed service's first command
    cut_short = slurm.job_details(job)
    assert cut_short.held and cut_short.attempt == 1
    slurm.requeue(job, ["node2"])
    details = slurm.job_details(job)
    assert details.attempt == 1 and not details.held  # finished, not requeued twice
    assert details.excluded_nodes == ("node2",)


def test_exclusions_never_leave_the_job_unschedulable(  # type: ignore[no-untyped-def]
    slurm: SlurmScheduler, submit
) -> None:
    job, _ = submit("-N2", "-H")  # held pending job: hold, update, release, no cred_expire wait
    plan = slurm.requeue_excluding(job, ["node1", "node2", "node3"])
    assert plan.exclude == ("node1", "node2") and plan.dropped == ("node3",)
    assert "needs 2 usable nodes" in plan.note
    _wait_state(slurm, job, JobState.RUNNING, 15)
    (job_info,) = slurm.poll([job]).jobs
    assert set(job_info.nodes) == {"node3", "node4"}


def test_drain_ours_and_leave_foreign_reasons(  # type: ignore[no-untyped-def]
    slurm: SlurmScheduler, slurm_cluster: SlurmCluster
) -> None:
    try:
        assert slurm.drain("node3", "xid 79 on gpu 1") is True
        assert slurm.drain("node3", "xid 79 on gpu 1") is True  # idempotent
        slurm_cluster.run(
            ["scontrol", "update", "NodeName=node4", "State=DRAIN", "Reason=NHC: bad"]
        )
        assert slurm.drain("node4", "xid 48") is False
        nodes = {n.name: n for n in slurm.poll(()).nodes}
        assert nodes["node3"].drain and nodes["node3"].reason == "trainmedic: xid 79 on gpu 1"
        assert nodes["node4"].drain and nodes["node4"].reason == "NHC: bad"
        slurm.resume_node("node4")  # not ours: stays drained
        slurm.resume_node("node3")
        nodes = {n.name: n for n in slurm.poll(()).nodes}
        assert not nodes["node3"].drain and nodes["node4"].reason == "NHC: bad"
    finally:
        for node in ("node3", "node4"):
            slurm_cluster.run(
                ["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False
            )


def test_node_down_shows_in_nodes_and_jobs(  # type: ignore[no-untyped-def]
    slurm: SlurmScheduler, slurm_cluster: SlurmCluster, submit
) -> None:
    requeue_job, _ = submit("-w", "node3")
    fragile_job, _ = submit("--no-requeue", "-w", "node4")
    _wait_state(slurm, requeue_job, JobState.RUNNING, 15)
    _wait_state(slurm, fragile_job, JobState.RUNNING, 15)
    try:
        for node in ("node3", "node4"):
            slurm_cluster.run(
                ["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=lab: died"]
            )
        time.sleep(0.5)
        snap = slurm.poll([requeue_job, fragile_job])
        nodes = {n.name: n for n in snap.nodes}
        assert nodes["node3"].state is NodeState.DOWN and nodes["node3"].reason == "lab: died"
        jobs = {j.job_id: j for j in snap.jobs}
        assert jobs[fragile_job].state is JobState.NODE_FAIL
        assert jobs[requeue_job].attempt == 1  # requeued by Slurm itself
        assert jobs[requeue_job].state in (JobState.PENDING, JobState.COMPLETING)
    finally:
        for node in ("node3", "node4"):
            slurm_cluster.run(
                ["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False
            )


def test_failed_poll_is_stale(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """A wrong SLURM_CONF (squeue fails, or hangs looking for a controller): stale, no verdict."""
    wrong = SlurmScheduler(LocalRunner(slurm_conf=str(tmp_path / "missing.conf")), timeout=3)
    snap = wrong.poll(())
    assert snap.stale and snap.jobs == () and snap.nodes == ()
    assert snap.error.startswith("squeue --json -t all:")
