"""squeue --json / sinfo --json parsers on output recorded from the real 22.05 lab cluster
(tests/data/slurm/, made by SlurmCluster: see the file names for the scenario)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.base import JobInfo
from trainmedic.schedulers.slurm.parse import (
    decode_exit_code,
    parse_sinfo_json,
    parse_sinfo_nodes,
    parse_squeue_json,
)

DATA = Path(__file__).parent.parent / "data" / "slurm"


def _jobs(name: str) -> dict[str, JobInfo]:
    return {j.job_id: j for j in parse_squeue_json((DATA / name).read_text())}


def test_mixed_states_recorded() -> None:
    jobs = _jobs("squeue_mixed_states.json")
    run = jobs["1"]
    assert run.state is JobState.RUNNING
    assert run.nodes == ("node1", "node2")
    assert run.attempt == 0 and not run.held
    assert run.comment.startswith('{"trainmedic"')
    assert run.stdout_path == "/tmp/c1rec/lab/run-1.out"
    assert (run.partition, run.user, run.name) == ("debug", "root", "train-run")
    expected = {
        "2": (JobState.COMPLETED, 0, False),
        "3": (JobState.FAILED, 3, False),
        "4": (JobState.PENDING, None, True),  # sbatch -H: JobHeldUser, priority 0
        "5": (JobState.PENDING, None, False),  # --begin in the future
        "6": (JobState.NODE_FAIL, 143, False),
        "7": (JobState.CANCELLED, 143, False),
        "8": (JobState.PENDING, None, False),  # requeued, waiting cred_expire (BeginTime)
        "9": (JobState.PENDING, None, True),  # scontrol requeuehold
    }
    for job_id, (state, exit_code, held) in expected.items():
        job = jobs[job_id]
        assert (job.state, job.exit_code, job.held) == (state, exit_code, held), job_id
    assert jobs["6"].reason == "NodeDown"
    assert jobs["8"].attempt == 1 and jobs["8"].nodes == ()
    assert jobs["9"].excluded_nodes == ("node5", "node6")


def test_requeued_job_runs_again_with_next_attempt() -> None:
    job = _jobs("squeue_requeued_running.json")["8"]
    assert (job.state, job.attempt, job.nodes) == (JobState.RUNNING, 1, ("node4",))


def test_node_down_requeue_is_seen_as_completing_then_pending() -> None:
    """A --requeue job on a node set DOWN never shows NODE_FAIL in squeue: it is COMPLETING
    (the dead node already gone from its list) with restart_cnt+1, then PENDING."""
    jobs = _jobs("squeue_after_node_down.json")
    assert jobs["1"].state is JobState.COMPLETING
    assert jobs["1"].attempt == 1 and jobs["1"].nodes == ("node1",)
    later = _jobs("squeue_array_reqnodenotavail.json")
    assert later["1"].state is JobState.PENDING and later["1"].reason == "ReqNodeNotAvail"


def test_array_tasks_keep_their_display_ids_and_real_output_paths() -> None:
    jobs = _jobs("squeue_array_reqnodenotavail.json")
    assert set(jobs) == {"1", "2_0", "2_1"}
    assert jobs["2_0"].stdout_path == "/tmp/c1rec/lab2/arr-3.out"


def test_sinfo_states_and_drain_reasons() -> None:
    nodes = {
        n.name: n for n in parse_sinfo_json((DATA / "sinfo_idle_alloc_drain_down.json").read_text())
    }
    assert nodes["node1"].state is NodeState.ALLOCATED and not nodes["node1"].drain
    assert nodes["node2"].drain and nodes["node2"].reason == "NHC: bad"
    assert nodes["node3"].state is NodeState.DOWN
    assert nodes["node5"].state is NodeState.IDLE
    assert nodes["node6"].drain and nodes["node6"].reason.startswith("trainmedic:")
    other = {
        n.name: n for n in parse_sinfo_json((DATA / "sinfo_not_responding_fail.json").read_text())
    }
    assert other["node1"].state is NodeState.NOT_RESPONDING  # slurmd killed: idle*
    assert other["node2"].state is NodeState.DOWN
    assert other["node3"].state is NodeState.FAIL
    full = parse_sinfo_nodes((DATA / "sinfo_not_responding_fail.json").read_text())
    assert all(n.partitions == ("debug",) and n.cpus == 2 for n in full)


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[]", '{"jobs": 3}', '{"meta": {}}', '{"errors": ["boom"], "jobs": []}'],
)
def test_garbled_squeue_raises_scheduler_error(text: str) -> None:
    with pytest.raises(SchedulerError, match="squeue --json"):
        parse_squeue_json(text)


def test_a_malformed_record_is_skipped_and_counted_not_the_whole_answer() -> None:
    good = {"job_id": 1, "job_state": "RUNNING", "nodes": "node1"}
    bad_jobs = [
        {"name": "x"},  # no id
        {"job_id": 2, "job_state": "RUNNING", "nodes": "a[0-99999]b[0-99999]"},  # 10^10 names
        {"job_id": 3, "job_state": "FAILED", "exit_code": {"signal": []}},  # wrong shape
        {"job_id": 4, "job_state": "RUNNING", "array_task_id": "7; rm"},
        {"job_id": True, "job_state": "RUNNING"},
        "not a job",
    ]
    before = BAD_INPUT.snapshot()[BadInput.SLURM_JOB]
    jobs = parse_squeue_json(json.dumps({"jobs": [*bad_jobs, good]}))
    assert [j.job_id for j in jobs] == ["1"]
    assert BAD_INPUT.snapshot()[BadInput.SLURM_JOB] - before == len(bad_jobs)
    huge = '{"jobs": [{"job_id": ' + "9" * 5000 + ', "job_state": "RUNNING"}, '
    huge += json.dumps(good) + "]}"
    assert [j.job_id for j in parse_squeue_json(huge)] == ["1"]  # int() would raise on it
    nodes = [{"name": "n1"}, {"name": "-oProxyCommand=x", "state": "IDLE"}]
    nodes += [{"name": "n2", "state": "IDLE"}]
    assert [n.name for n in parse_sinfo_json(json.dumps({"nodes": nodes}))] == ["n2"]
    with pytest.raises(SchedulerError, match="not JSON"):
        parse_squeue_json("[" * 100_000 + "]" * 100_000)  # RecursionError, not a crash


def test_newer_slurm_shapes_are_understood() -> None:
    """23.02+ prints states as lists and numbers as {set, number}."""
    doc = {
        "jobs": [
            {
                "job_id": 7,
                "job_state": ["PENDING", "REQUEUED"],
                "state_reason": "BeginTime",
                "restart_cnt": 2,
                "priority": {"set": True, "number": 0},
                "nodes": "",
                "array_task_id": {"set": False, "number": 0},
            }
        ]
    }
    (job,) = parse_squeue_json(json.dumps(doc))
    assert (job.job_id, job.state, job.attempt, job.held) == ("7", JobState.PENDING, 2, True)
    nodes = parse_sinfo_json(json.dumps({"nodes": [{"name": "n1", "state": ["IDLE", "DRAIN"]}]}))
    assert nodes[0].state is NodeState.IDLE and nodes[0].drain


def test_exit_codes() -> None:
    assert decode_exit_code(768) == 3
    assert decode_exit_code(9) == 137
    assert decode_exit_code(0) == 0
    assert decode_exit_code({"return_code": {"set": True, "number": 2}}) == 2
    assert decode_exit_code(None) is None
