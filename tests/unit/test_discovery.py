"""Which jobs the service picks up by itself: comment opt-in, [watch] criteria."""

from __future__ import annotations

from trainmedic.core.states import JobState
from trainmedic.schedulers.base import JobInfo
from trainmedic.service.config import default_config
from trainmedic.service.config.sections import WatchConfig
from trainmedic.service.discovery import discover

POLICY = default_config().policy


def _job(job_id: str, comment: str = "", **kw: object) -> JobInfo:
    return JobInfo(
        job_id,
        JobState.RUNNING,
        name=str(kw.get("name", "train")),
        nodes=("node1", "node2"),
        stdout_path=f"/logs/{job_id}.out",
        comment=comment,
        partition=str(kw.get("partition", "gpu")),
        user=str(kw.get("user", "alice")),
    )


def test_a_job_opting_in_through_its_comment_is_watched_with_its_policy() -> None:
    comment = '{"trainmedic": {"checkpoint_dir": "/ckpt/7", "stop_enforcement": true}}'
    (found,) = discover([_job("7", comment), _job("8")], WatchConfig(), POLICY, known=())
    assert found.job_id == "7" and found.why == "opted in through its comment"
    assert found.spec.checkpoint_dir == "/ckpt/7"
    assert found.spec.policy == {"stop_enforcement": True}
    assert found.spec.log_paths == ("/logs/7.out",)


def test_config_criteria_select_jobs_and_nothing_is_watched_without_criteria() -> None:
    jobs = [_job("1", partition="gpu"), _job("2", partition="cpu")]
    assert discover(jobs, WatchConfig(), POLICY, known=()) == []
    found = discover(jobs, WatchConfig(partitions=("gpu",)), POLICY, known=())
    assert [f.job_id for f in found] == ["1"]
    assert discover(jobs, WatchConfig(partitions=("gpu",)), POLICY, known=("1",)) == []


def test_a_bad_policy_in_the_comment_keeps_the_job_watched_with_defaults() -> None:
    comment = '{"trainmedic": {"checkpoint_dir": "/c", "retry_budget": {"hardware": "lots"}}}'
    (found,) = discover([_job("5", comment)], WatchConfig(), POLICY, known=())
    assert found.spec.policy == {} and found.spec.checkpoint_dir == "/c"


def test_kernel_logs_follow_the_template_and_finished_jobs_are_left_alone() -> None:
    template = "/var/log/nodes/{node}/kern.log"
    comment = '{"trainmedic": {}}'
    (found,) = discover([_job("3", comment)], WatchConfig(), POLICY, (), template)
    assert found.spec.kernel_logs == {
        "node1": "/var/log/nodes/node1/kern.log",
        "node2": "/var/log/nodes/node2/kern.log",
    }
    done = JobInfo("4", JobState.COMPLETED, comment=comment)
    assert discover([done], WatchConfig(), POLICY, ()) == []
