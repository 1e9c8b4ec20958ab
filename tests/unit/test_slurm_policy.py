"""Which jobs are watched, and the exclusion plan that never strands a job."""

from __future__ import annotations

import pytest

from trainmedic.core.errors import ConfigError
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.base import JobInfo, NodeInfo
from trainmedic.schedulers.slurm.policy import parse_job_policy, plan_exclusion, select_watched


def test_policy_from_comment() -> None:
    comment = '{"trainmedic": {"checkpoint_dir": "/ckpt", "max_restarts": 3}}'
    assert parse_job_policy(comment) == {"checkpoint_dir": "/ckpt", "max_restarts": 3}
    assert parse_job_policy('{"trainmedic": {}}') == {}
    for not_opted in ("", "trainmedic please", '{"other": 1}', "{trainmedic", "[1]"):
        assert parse_job_policy(not_opted) is None
    with pytest.raises(ConfigError, match="must be a JSON object"):
        parse_job_policy('{"trainmedic": 3}')


def _job(
    job_id: str, comment: str = "", partition: str = "", user: str = "", name: str = ""
) -> JobInfo:
    return JobInfo(job_id, JobState.RUNNING, name, comment=comment, partition=partition, user=user)


def test_select_watched() -> None:
    jobs = [
        _job("1", comment='{"trainmedic": {}}', partition="cpu"),
        _job("2", partition="gpu", user="alice", name="train-llm"),
        _job("3", partition="gpu", user="bob", name="train-x"),
        _job("4", partition="cpu", user="alice", name="eval"),
        _job("5", comment='{"trainmedic": "bad"}'),
    ]

    def ids(**kw: object) -> list[str]:
        return [j.job_id for j in select_watched(jobs, **kw)]  # type: ignore[arg-type]

    assert ids() == ["1", "5"]  # opted in only; a bad policy is still an opt-in
    assert ids(partitions=["gpu"]) == ["1", "2", "3", "5"]
    assert ids(partitions=["gpu"], users=["alice"]) == ["1", "2", "5"]
    assert ids(name_pattern="train-*") == ["1", "2", "3", "5"]
    assert ids(users=["alice"], name_pattern="eval") == ["1", "4", "5"]


def _nodes(*spec: str) -> list[NodeInfo]:
    """'n1' idle, 'n2!' drained, 'n3x' down."""
    out = []
    for s in spec:
        name = s.rstrip("!x")
        state = NodeState.DOWN if s.endswith("x") else NodeState.IDLE
        out.append(NodeInfo(name=name, state=state, drain=s.endswith("!")))
    return out


def test_plain_exclusion_is_the_union() -> None:
    plan = plan_exclusion(["n1"], ["n2"], 2, _nodes("n1", "n2", "n3", "n4", "n5"))
    assert plan.exclude == ("n1", "n2") and plan.dropped == () and plan.usable_after == 3
    assert not plan.reset and plan.note == ""


def test_oldest_exclusions_give_way_to_keep_the_job_schedulable() -> None:
    plan = plan_exclusion(["n1", "n2"], ["n3"], 2, _nodes("n1", "n2", "n3", "n4"))
    assert plan.exclude == ("n2", "n3")  # newest first: n3 (asked), n2, then n1 would strand it
    assert plan.dropped == ("n1",) and plan.usable_after == 2
    assert "needs 2 usable nodes" in plan.note


def test_unusable_nodes_count_and_can_force_a_reset() -> None:
    nodes = _nodes("n1", "n2!", "n3x", "n4")
    plan = plan_exclusion(["n1"], ["n4"], 2, nodes)
    assert plan.exclude == () and plan.reset and plan.dropped == ("n1", "n4")
    drained_ok = plan_exclusion([], ["n2", "n3"], 2, nodes)
    assert drained_ok.exclude == ("n2", "n3") and drained_ok.usable_after == 2


def test_unknown_nodes_are_not_sent_to_slurm() -> None:
    plan = plan_exclusion([], ["n9", "n1"], 1, _nodes("n1", "n2"))
    assert plan.exclude == ("n1",) and plan.dropped == ("n9",)
    assert "unknown nodes ['n9']" in plan.note


def test_excluded_required_nodes_leave_the_required_list() -> None:
    nodes = _nodes("n1", "n2", "n3", "n4")
    plan = plan_exclusion([], ["n2"], 2, nodes, required=["n1", "n2"])
    assert plan.exclude == ("n2",) and plan.required == ("n1",)
    assert plan_exclusion([], ["n3"], 2, nodes, required=["n1", "n2"]).required is None
