"""SlurmScheduler against recorded outputs through the FakeRunner seam."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.errors import SchedulerError, SchedulerUnavailable
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.base import SchedulerAdapter
from trainmedic.schedulers.slurm.runner import CompletedCommand, FakeRunner, SshRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler

DATA = Path(__file__).parent.parent / "data" / "slurm"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _fake() -> FakeRunner:
    fake = FakeRunner()
    fake.add(["squeue", "--json"], _read("squeue_mixed_states.json"))
    fake.add(["sinfo", "--json"], _read("sinfo_idle_alloc_drain_down.json"))
    fake.add(["scontrol", "-o", "show", "job", "1"], _read("scontrol_show_job_running.txt"))
    fake.add(
        ["scontrol", "-o", "show", "job", "8"], _read("scontrol_show_job_requeued_pending.txt")
    )
    fake.add(
        ["scontrol", "-o", "show", "node", "node2"], _read("scontrol_show_node_drain_foreign.txt")
    )
    fake.add(["scontrol", "-o", "show", "node", "node3"], _read("scontrol_show_node_idle.txt"))
    for sub in ("requeuehold", "hold", "release", "update"):
        fake.add(["scontrol", sub])
    fake.add(["scancel"])
    return fake


def test_is_a_scheduler_adapter() -> None:
    adapter: SchedulerAdapter = SlurmScheduler(FakeRunner())
    assert adapter.name == "slurm"


def test_poll_is_two_batched_calls_plus_cached_details() -> None:
    fake = _fake()
    slurm = SlurmScheduler(fake, clock=lambda: 100.0)
    everything = slurm.poll(())
    assert not everything.stale and len(everything.jobs) == 9 and len(everything.nodes) == 6
    assert [c[0] for c in fake.calls] == ["squeue", "sinfo"]
    assert fake.calls[0] == ["squeue", "--json", "-t", "all"]
    fake.calls.clear()
    snap = slurm.poll(["1", "8"])
    assert [j.job_id for j in snap.jobs] == ["1", "8"]
    assert snap.jobs[0].stdout_path == "/tmp/c1rec/lab/run-1.out"
    assert [c for c in fake.calls if "show" in c] == [
        ["scontrol", "-o", "show", "job", "1"],
        ["scontrol", "-o", "show", "job", "8"],
    ]
    fake.calls.clear()
    slurm.poll(["1", "8"])  # same attempts: details come from the cache
    assert [c[0] for c in fake.calls] == ["squeue", "sinfo"]
    nodes = {n.name: n for n in snap.nodes}
    assert nodes["node3"].state is NodeState.DOWN and snap.time == 100.0


@pytest.mark.parametrize(
    "failure",
    [
        CompletedCommand(
            ("squeue",), 1, "", "slurm_load_jobs error: Unable to contact slurm controller"
        ),
        CompletedCommand(("squeue",), 0, '{"jobs": [{"job_state": "RUN'),
    ],
)
def test_failed_or_garbled_poll_is_stale_not_a_verdict(failure: CompletedCommand) -> None:
    fake = _fake()
    fake.responses[("squeue", "--json")] = failure
    snap = SlurmScheduler(fake).poll(["1"])
    assert snap.stale and snap.jobs == () and snap.nodes == ()
    assert "squeue" in snap.error and "\n" not in snap.error


def test_unreachable_scheduler_is_stale() -> None:
    def down(argv: list[str]) -> CompletedCommand:
        raise SchedulerUnavailable("ssh head: Connection refused")

    fake = FakeRunner({("squeue",): down})
    snap = SlurmScheduler(fake).poll(())
    assert snap.stale and "Connection refused" in snap.error


def test_requeue_running_job_holds_excludes_and_releases() -> None:
    fake = _fake()
    plan = SlurmScheduler(fake).requeue_excluding("1", ["node2"])
    acts = [c for c in fake.calls if c[1] != "-o" and c[0] == "scontrol"]
    assert acts == [
        ["scontrol", "requeuehold", "1"],
        # job 1 was submitted with -w node[1-2]: the excluded node leaves its ReqNodeList
        ["scontrol", "update", "JobId=1", "ReqNodeList=node1", "ExcNodeList=node2"],
        ["scontrol", "release", "1"],
    ]
    assert plan.exclude == ("node2",) and plan.dropped == ()


def test_requeue_pending_job_holds_instead_of_requeuehold() -> None:
    fake = _fake()
    SlurmScheduler(fake).requeue("8", ["node4"])
    acts = [c[1] for c in fake.calls if c[0] == "scontrol" and c[1] != "-o"]
    assert acts == ["hold", "update", "release"]


def test_requeue_never_strands_the_job() -> None:
    """6 nodes: node2 and node6 drained, node3 down -> 3 usable; job 1 needs 2 nodes: at most
    one more usable node may be excluded; the newest request wins."""
    fake = _fake()
    plan = SlurmScheduler(fake).requeue_excluding("1", ["node1", "node4", "node5"])
    assert plan.exclude == ("node1",) and plan.dropped == ("node4", "node5")
    assert ["scontrol", "update", "JobId=1", "ReqNodeList=node2", "ExcNodeList=node1"] in fake.calls


def test_drain_respects_foreign_reason() -> None:
    fake = _fake()
    slurm = SlurmScheduler(fake)
    assert slurm.drain("node2", "xid 79") is False
    assert not fake.commands("update")
    assert slurm.drain("node3", "xid 79 on gpu 1") is True
    assert fake.commands("update") == [
        [
            "scontrol",
            "update",
            "NodeName=node3",
            "State=DRAIN",
            "Reason=trainmedic: xid 79 on gpu 1",
        ]
    ]


def test_drain_is_idempotent_and_resume_only_for_our_drains() -> None:
    fake = _fake()
    ours = "NodeName=node3 State=IDLE+DRAIN Weight=1 Reason=trainmedic: xid 79 [root@2026-11-29]"
    fake.add(["scontrol", "-o", "show", "node", "node3"], ours)
    slurm = SlurmScheduler(fake)
    assert slurm.drain("node3", "again") is True
    assert not fake.commands("update")
    slurm.resume_node("node2")  # NHC's drain: untouched
    assert not fake.commands("update")
    slurm.resume_node("node3")
    assert fake.commands("update") == [["scontrol", "update", "NodeName=node3", "State=RESUME"]]


def test_cancel_records_why() -> None:
    fake = _fake()
    SlurmScheduler(fake).cancel("1", "deterministic error\nat iteration 5")
    assert fake.calls == [
        [
            "scontrol",
            "update",
            "JobId=1",
            "AdminComment=trainmedic: deterministic error at iteration 5",
        ],
        ["scancel", "1"],
    ]


@pytest.mark.parametrize("job_id", ["1;rm", "-1", "abc", "1_", ""])
def test_invalid_job_ids_run_nothing(job_id: str) -> None:
    fake = _fake()
    with pytest.raises(SchedulerError, match="invalid Slurm job id"):
        SlurmScheduler(fake).requeue(job_id, [])
    assert fake.calls == []


def test_invalid_node_names_run_nothing() -> None:
    fake = _fake()
    with pytest.raises(SchedulerError, match="invalid node name"):
        SlurmScheduler(fake).drain("node1 State=DOWN", "x")
    with pytest.raises(SchedulerError, match="invalid node name"):
        SlurmScheduler(fake).requeue("1", ["-x"])
    assert fake.calls == []


def test_failing_command_is_one_line_scheduler_error() -> None:
    fake = _fake()
    fake.add(["scontrol", "requeuehold"], "", 1, "Job has already finished\nfor job 1")
    with pytest.raises(SchedulerError) as err:
        SlurmScheduler(fake).hold("1")
    assert str(err.value) == "scontrol requeuehold 1: exit 1: Job has already finished for job 1"


def test_states_seen_by_poll() -> None:
    snap = SlurmScheduler(_fake()).poll(())
    states = {j.job_id: j.state for j in snap.jobs}
    assert states["6"] is JobState.NODE_FAIL and states["3"] is JobState.FAILED


def test_ssh_runner_quotes_the_remote_command() -> None:
    ssh = SshRunner("head", known_hosts="/k", port=2222, identity_file="/id", slurm_conf="/etc/s c")
    argv = ssh.remote_argv(["scontrol", "update", "NodeName=n1", "Reason=trainmedic: x; rm -rf /"])
    assert argv[:2] == ["ssh", "-o"] and "StrictHostKeyChecking=yes" in argv
    assert "BatchMode=yes" in argv and "UserKnownHostsFile=/k" in argv
    assert argv[-3:-1] == ["head", "--"]
    assert (
        argv[-1]
        == "env 'SLURM_CONF=/etc/s c' scontrol update NodeName=n1 'Reason=trainmedic: x; rm -rf /'"
    )
    with pytest.raises(ValueError):
        SshRunner("-oProxyCommand=x", known_hosts="/k")


def test_details_calls_per_poll_are_bounded() -> None:
    fake = _fake()
    slurm = SlurmScheduler(fake, details_per_poll=1)
    first = slurm.poll(["1", "8"])
    assert len([c for c in fake.calls if "show" in c]) == 1
    assert {j.job_id for j in first.jobs} == {"1", "8"}  # the other keeps squeue's paths
    slurm.poll(["1", "8"])
    assert len([c for c in fake.calls if "show" in c]) == 2  # its turn came
    slurm.poll(["1", "8"])
    assert len([c for c in fake.calls if "show" in c]) == 2  # both cached now


def test_failed_update_still_releases_the_job() -> None:
    fake = _fake()
    fake.add(["scontrol", "update"], "", 1, "Invalid node name specified for job 1")
    with pytest.raises(SchedulerError, match="Invalid node name"):
        SlurmScheduler(fake).requeue("1", ["node3"])
    assert fake.calls[-1] == ["scontrol", "release", "1"]
