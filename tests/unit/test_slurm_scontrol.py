"""scontrol -o show job|node parsers on recorded 22.05 output."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.slurm.scontrol import (
    parse_scontrol_job,
    parse_scontrol_node,
    parse_scontrol_record,
)

DATA = Path(__file__).parent.parent / "data" / "slurm"


def test_running_job_details() -> None:
    d = parse_scontrol_job((DATA / "scontrol_show_job_running.txt").read_text())
    assert (d.job_id, d.state, d.attempt, d.node_count) == ("1", JobState.RUNNING, 0, 2)
    assert d.nodes == ("node1", "node2") and d.batch_host == "node1"
    assert d.stdout_path == d.stderr_path == "/tmp/c1rec/lab/run-1.out"
    assert d.comment == (
        '{"trainmedic": {"checkpoint_dir": "/ckpt/run1", "max_restarts": 3, "enforce_stop": true}}'
    )
    assert d.requeue and not d.held and d.excluded_nodes == () and d.user == "root"


def test_requeued_and_requeuehold_details() -> None:
    pending = parse_scontrol_job((DATA / "scontrol_show_job_requeued_pending.txt").read_text())
    assert (pending.state, pending.attempt, pending.reason, pending.held) == (
        JobState.PENDING,
        1,
        "BeginTime",
        False,
    )
    assert pending.nodes == () and pending.batch_host == ""
    running = parse_scontrol_job((DATA / "scontrol_show_job_requeued_running.txt").read_text())
    assert (running.state, running.attempt, running.batch_host) == (JobState.RUNNING, 1, "node4")
    held = parse_scontrol_job((DATA / "scontrol_show_job_requeuehold.txt").read_text())
    assert held.held and held.reason == "job_requeued_in_held_state"
    assert held.excluded_nodes == ("node5", "node6") and held.node_count == 2


def test_free_text_values_keep_spaces_and_equals_signs() -> None:
    line = (
        "JobId=5 JobName=my job Priority=1 JobState=RUNNING Reason=None Restarts=0 "
        "Command=/bin/run.sh --lr=0.1 --name x WorkDir=/tmp/a b "
        'Comment={"trainmedic": {"note": "a=b c=d"}} StdErr=/o StdIn=/dev/null StdOut=/o'
    )
    f = parse_scontrol_record(line)
    assert f["JobName"] == "my job"
    assert f["Command"] == "/bin/run.sh --lr=0.1 --name x"
    assert f["WorkDir"] == "/tmp/a b"
    assert f["Comment"] == '{"trainmedic": {"note": "a=b c=d"}}'
    assert f["StdOut"] == "/o"


def test_node_details_strip_the_reason_stamp() -> None:
    node = parse_scontrol_node((DATA / "scontrol_show_node_drain_foreign.txt").read_text())
    assert (node.name, node.state, node.drain, node.reason) == (
        "node2",
        NodeState.MIXED,
        True,
        "NHC: bad",
    )
    idle = parse_scontrol_node((DATA / "scontrol_show_node_idle.txt").read_text())
    assert (idle.state, idle.drain, idle.reason) == (NodeState.IDLE, False, "")


@pytest.mark.parametrize(
    ("state", "expected", "drain"),
    [
        ("IDLE*", NodeState.NOT_RESPONDING, False),
        ("DOWN*+DRAIN", NodeState.DOWN, True),
        ("IDLE+FAIL", NodeState.FAIL, False),
        ("ALLOCATED+DRAIN", NodeState.ALLOCATED, True),
    ],
)
def test_node_state_strings(state: str, expected: NodeState, drain: bool) -> None:
    node = parse_scontrol_node(f"NodeName=n1 Arch=x86_64 State={state} Weight=1 Reason=x [a@b]")
    assert (node.state, node.drain, node.reason) == (expected, drain, "x")


def test_not_a_record_is_an_error() -> None:
    with pytest.raises(SchedulerError, match="no JobId"):
        parse_scontrol_job("slurm_load_jobs error: Invalid job id specified")
    with pytest.raises(SchedulerError, match="no NodeName"):
        parse_scontrol_node("")
