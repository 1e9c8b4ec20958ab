"""scontrol -o show job|node parsers on recorded 22.05 output."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.badinput import BAD_INPUT, BadInput
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


def _running_with(**replace: str) -> str:
    line = (DATA / "scontrol_show_job_running.txt").read_text().strip()
    for key, value in replace.items():
        head, rest = line.split(f" {key}=", 1)
        following = rest.split(" ", 1)[1] if key != "Comment" else rest.split("  ", 1)[1]
        line = f"{head} {key}={value} {following}"
    return line


@pytest.mark.parametrize(
    "comment",
    [
        "x JobState=COMPLETED NodeList=node9 Restarts=7",  # keys printed before Comment
        "note: ExcNodeList=node1 BatchHost=evil a=b",
    ],
)
def test_field_text_inside_a_comment_stays_in_the_comment(comment: str) -> None:
    d = parse_scontrol_job(_running_with(Comment=comment))
    assert d.comment == comment
    assert (d.state, d.nodes, d.attempt, d.batch_host) == (
        JobState.RUNNING,
        ("node1", "node2"),
        0,
        "node1",
    )
    assert d.stdout_path == "/tmp/c1rec/lab/run-1.out" and d.excluded_nodes == ()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("Comment", "x StdOut=/etc/shadow"),  # a key printed after Comment: which is real?
        ("Comment", "x StdErr=/dev/zero StdIn=/dev/null StdOut=/dev/zero Power="),
        ("Comment", "x Power=1"),
        ("JobName", "x JobState=COMPLETED"),
        ("JobName", "x UserId=alice(1000)"),
        ("JobName", "x Comment=y"),  # would swallow every field up to StdErr
        ("WorkDir", "/w StdOut=/etc/passwd"),
    ],
)
def test_a_value_that_could_be_read_two_ways_is_refused_and_counted(key: str, value: str) -> None:
    before = BAD_INPUT.snapshot()[BadInput.SCONTROL_RECORD]
    with pytest.raises(SchedulerError, match="ambiguous"):
        parse_scontrol_job(_running_with(**{key: value}))
    assert BAD_INPUT.snapshot()[BadInput.SCONTROL_RECORD] == before + 1


def test_a_node_reason_with_field_text_and_huge_numbers() -> None:
    node = parse_scontrol_node(
        "NodeName=n1 Arch=x86_64 State=IDLE Weight=1 Reason=admin: State=DOWN [root@now]"
    )
    assert (node.state, node.reason) == (NodeState.IDLE, "admin: State=DOWN")
    line = _running_with(Restarts="9" * 5000, NumNodes="9" * 5000)
    assert parse_scontrol_job(line).attempt == 0  # int() of 5000 digits would raise
    with pytest.raises(SchedulerError, match="ambiguous"):
        parse_scontrol_job(_running_with(Comment="c" * (1 << 20)))
