"""The local scheduler's pure decisions and its node bookkeeping (files only, no processes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.local.launch import pid_alive, wrapped_argv
from trainmedic.schedulers.local.scheduler import LocalScheduler
from trainmedic.schedulers.local.state import (
    ClusterState,
    JobRecord,
    Launch,
    LocalJobSpec,
    NodeRecord,
    choose_nodes,
    launch_outcome,
    relax_exclusions,
    state_from_json,
    state_to_json,
)

NODES = ("node1", "node2", "node3", "node4")


def test_choose_prefers_previous_nodes_then_name_order() -> None:
    assert choose_nodes(NODES, set(), ["node2"], ["node2", "node1"], 2) == ("node1", "node3")
    assert choose_nodes(NODES, {"node1"}, [], ["node4"], 2) == ("node4", "node2")
    assert choose_nodes(NODES, {"node1", "node3"}, ["node4"], [], 2) is None


def test_relax_drops_oldest_exclusions_only_as_needed() -> None:
    kept, dropped = relax_exclusions(NODES, {"node4"}, ["node1", "node2"], 2)
    assert (kept, dropped) == (("node2",), ("node1",))
    assert relax_exclusions(NODES, set(), ["node2"], 2) == (("node2",), ())
    # Drained nodes never come back, however many exclusions are dropped.
    assert relax_exclusions(NODES, {"node1", "node2", "node3"}, ["node4"], 2) == ((), ("node4",))


@pytest.mark.parametrize(
    ("codes", "alive", "state"),
    [
        ([None, None], [True, True], JobState.RUNNING),
        ([0, None], [False, True], JobState.RUNNING),
        ([0, 0], [False, False], JobState.COMPLETED),
        ([1, None], [False, True], JobState.FAILED),
        ([None, None], [False, True], JobState.FAILED),  # killed from outside, no exit file
        ([137, 1], [False, False], JobState.FAILED),
    ],
)
def test_launch_outcome(codes: list[int | None], alive: list[bool], state: JobState) -> None:
    assert launch_outcome(codes, alive) is state


def test_state_round_trips_through_json() -> None:
    spec = LocalJobSpec("j", 2, 2, ("-m", "x"), "/run", env={"A": "1"})
    launch = Launch("node1", 0, "m", "/e", pid=42)
    job = JobRecord("7", spec, JobState.RUNNING, ("node1", "node3"), 1, 2, ("node2",))
    job = JobRecord(**{**{f: getattr(job, f) for f in job.__slots__}, "launches": (launch,)})
    state = ClusterState((NodeRecord("node1", True, "trainmedic: xid"),), {"7": job}, 8)
    assert state_from_json(state_to_json(state)) == state


def test_wrapper_records_exit_status(tmp_path: Path) -> None:
    import subprocess

    exit_file = tmp_path / "rc"
    subprocess.run(wrapped_argv(["sh", "-c", "exit 3"], exit_file), check=False)
    assert exit_file.read_text().strip() == "3"
    assert pid_alive(1) and not pid_alive(2**22 + 12345)


def test_drain_owns_only_trainmedic_reasons(tmp_path: Path) -> None:
    sched = LocalScheduler(tmp_path / "cluster", nodes=NODES)
    assert sched.drain("node2", "trainmedic: Xid 79 on node2")
    assert sched.drain("node2", "trainmedic: repeat offender")  # our own: may update
    sched.admin_drain("node3", "NHC: check_hw_eth failed")
    assert not sched.drain("node3", "trainmedic: Xid 48")
    with pytest.raises(SchedulerError, match="must start with 'trainmedic:'"):
        sched.drain("node1", "bad disk")
    with pytest.raises(SchedulerError, match="unknown node"):
        sched.drain("node9", "trainmedic: x")
    sched.resume_node("node3")  # not ours: stays drained
    nodes = {n.name: n for n in sched.poll([]).nodes}
    assert nodes["node3"].reason == "NHC: check_hw_eth failed" and nodes["node3"].drain
    assert nodes["node2"].reason == "trainmedic: repeat offender"
    assert nodes["node1"].state is NodeState.IDLE and not nodes["node1"].drain
    sched.resume_node("node2")
    sched.resume_node("node2")  # idempotent
    # A second instance on the same directory sees the same nodes (the state is on disk).
    again = {n.name: n for n in LocalScheduler(tmp_path / "cluster", nodes=NODES).poll([]).nodes}
    assert not again["node2"].drain and again["node3"].drain


def test_job_waits_when_nodes_are_drained_and_errors_are_scheduler_errors(tmp_path: Path) -> None:
    sched = LocalScheduler(tmp_path / "cluster", nodes=("node1", "node2"))
    sched.admin_drain("node1", "maintenance")
    spec = LocalJobSpec("j", 2, 1, ("-m", "trainmedic.demo.trainer.cli"), str(tmp_path / "run"))
    job_id = sched.submit(spec)
    (info,) = sched.poll([job_id]).jobs
    assert info.state is JobState.PENDING and info.reason.startswith("ReqNodeNotAvail")
    sched.hold(job_id)
    assert sched.job(job_id).held
    sched.cancel(job_id, "test")
    sched.cancel(job_id, "test")  # idempotent
    assert sched.job(job_id).state is JobState.CANCELLED
    with pytest.raises(SchedulerError, match="unknown job"):
        sched.requeue("99", [])
    with pytest.raises(SchedulerError, match="needs 3 nodes"):
        sched.submit(LocalJobSpec("big", 3, 1, ("x",), str(tmp_path)))
    snapshot = LocalScheduler(tmp_path / "cluster").poll([job_id, "99"])
    assert [j.job_id for j in snapshot.jobs] == [job_id] and not snapshot.stale


def test_new_instance_finishes_a_stop_the_dead_one_began(tmp_path: Path) -> None:
    """The service died mid-requeue: the job is recorded pending with launches still to
    stop. The next instance's poll stops them (found by their marker) before anything."""
    import dataclasses
    import os

    from trainmedic.schedulers.local.launch import LAUNCH_MARKER, has_marker, spawn
    from trainmedic.schedulers.local.state import write_atomic

    cluster = tmp_path / "cluster"
    sched = LocalScheduler(cluster, nodes=NODES)
    spec = LocalJobSpec("j", 1, 1, ("x",), str(tmp_path / "run"))
    sched.admin_drain("node1", "hold everything")  # keep the job from starting for real
    for node in NODES[1:]:
        sched.admin_drain(node, "hold everything")
    job_id = sched.submit(spec)
    child = spawn(["sleep", "60"], dict(os.environ, **{LAUNCH_MARKER: "m1"}), tmp_path / "o")
    for _ in range(100):  # /proc/<pid>/environ reads empty for a moment around exec
        if has_marker(child.pid, "m1"):
            break
        time.sleep(0.01)
    assert has_marker(child.pid, "m1") and not has_marker(os.getpid(), "m1")
    state = state_from_json((cluster / "state.json").read_text())
    job = dataclasses.replace(
        state.jobs[job_id], held=True, stale=(Launch("node1", 0, "m1", "/nonexistent", child.pid),)
    )
    write_atomic(
        cluster / "state.json", state_to_json(dataclasses.replace(state, jobs={job_id: job}))
    )

    info = LocalScheduler(cluster).poll([job_id]).jobs[0]
    assert child.wait(timeout=5) is not None  # stopped
    assert (info.state, info.held) == (JobState.PENDING, True)
    assert state_from_json((cluster / "state.json").read_text()).jobs[job_id].stale == ()
