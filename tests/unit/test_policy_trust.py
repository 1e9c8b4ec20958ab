"""Only the cluster's own evidence takes a node out: a line that appears only in a job's output
never drains a node nor charges its history (pure policy, the engine's verdict, and the
service over a real SQLite store)."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.engine.signals import job_status_event, verdict_for_anomaly
from trainmedic.core.errors import ConfigError
from trainmedic.core.model import (
    Action,
    Category,
    Event,
    EvidenceSource,
    Implicated,
    Kind,
    Role,
    Verdict,
)
from trainmedic.core.observations import JobStatus
from trainmedic.core.policy import PolicyContext, decide
from trainmedic.core.policy.config import PolicyConfig
from trainmedic.core.policy.trust import NodeCharge, node_charges
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.discovery import check_kernel_logs
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

XID79 = "NVRM: Xid (PCI:0000:5e:00): 79, pid=9244, name=python, GPU has fallen off the bus."


def _event(evidence: EvidenceSource, node: str | None, strong: bool = True) -> Event:
    return Event(
        signature="nvrm.xid",
        category=Category.GPU_HARDWARE,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=1,
        text=XID79,
        evidence=evidence,
        node=node,
        strong=strong,
    )


def _verdict(root: Event, nodes: tuple[str, ...]) -> Verdict:
    return Verdict(True, Kind.CRASH, Category.GPU_HARDWARE, 0.9, root, Implicated(nodes=nodes))


def _context(**changes: object) -> PolicyContext:
    base = PolicyContext(
        job_id="j",
        current_nodes=("node1", "node2"),
        healthy_spares=("node3", "node4"),
        cluster_size=8,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_job_output_never_drains_whatever_the_repeat_offender_count() -> None:
    stdout = _verdict(_event(EvidenceSource.APP_LOG, "node2"), ("node2",))
    for count, history in ((1, 0), (1, 50), (2, 1)):
        context = _context(
            node_history={"node2": history}, config=PolicyConfig(repeat_offender_count=count)
        )
        advice = decide(stdout, context)
        # The line names a node the job ran on: the job moves off it, nobody else is touched.
        assert advice.action is Action.RESTART_EXCLUDING and advice.exclude_nodes == ("node2",)
        assert advice.drain_nodes == (), (count, history)
        assert "only the job's own output" in advice.basis
        assert node_charges(stdout, context) == ()


def test_job_output_naming_a_node_the_job_did_not_run_on_touches_nothing() -> None:
    stdout = _verdict(_event(EvidenceSource.APP_LOG, "node7"), ("node7",))
    advice = decide(stdout, _context())
    assert advice.exclude_nodes == () and advice.drain_nodes == ()
    assert "node7 not in the job's nodes" in advice.basis
    assert node_charges(stdout, _context()) == ()


def test_the_clusters_own_evidence_charges_history_strong_or_not() -> None:
    kernel = _verdict(_event(EvidenceSource.KERNEL_LOG, "node2"), ("node2",))
    assert node_charges(kernel, _context()) == (
        NodeCharge("node2", True, "kernel_log evidence nvrm.xid"),
    )
    weak = _verdict(_event(EvidenceSource.KERNEL_LOG, "node2", strong=False), ("node2",))
    assert node_charges(weak, _context()) == (
        NodeCharge("node2", False, "kernel_log evidence nvrm.xid"),
    )
    # The app line is the root cause, the node's kernel log corroborates (the finding saw it).
    stdout = _verdict(_event(EvidenceSource.APP_LOG, "node2"), ("node2",))
    seen = _context(system_events=(_event(EvidenceSource.KERNEL_LOG, "node2", strong=False),))
    assert node_charges(stdout, seen) == (
        NodeCharge("node2", False, "kernel_log evidence nvrm.xid"),
    )
    assert decide(stdout, seen).drain_nodes == (), "weak, first incident: not drained"
    # A storage complaint in the same kernel log says nothing against node2's hardware.
    nfs = dataclasses.replace(
        _event(EvidenceSource.KERNEL_LOG, "node2", strong=False), category=Category.STORAGE
    )
    assert node_charges(stdout, _context(system_events=(nfs,))) == ()


def test_a_nodeless_scheduler_event_is_about_the_jobs_only_node_never_a_named_one() -> None:
    boot_fail = dataclasses.replace(
        _event(EvidenceSource.SCHEDULER, None), signature="scheduler.job_boot_fail"
    )
    # Two nodes: the job's output naming node2 does not pick the node the scheduler meant.
    named = _verdict(boot_fail, ("node2",))
    assert decide(named, _context()).drain_nodes == ()
    single = _context(current_nodes=("node2",))
    assert decide(named, single).drain_nodes == ("node2",)


def test_a_hardware_verdict_names_no_node_when_no_line_names_one() -> None:
    # A job-state crash lists every node of the job; the only line names none of them.
    anomaly = Anomaly(
        kind=Kind.CRASH,
        job_id="j",
        detected_at=10.0,
        since=10.0,
        trigger=Trigger.JOB_STATE,
        basis="scheduler reports FAILED",
        nodes=("node1", "node2"),
    )
    attributed = _verdict(_event(EvidenceSource.APP_LOG, None, strong=False), ())
    verdict = verdict_for_anomaly(anomaly, attributed)
    assert verdict.category is Category.GPU_HARDWARE and verdict.implicated.nodes == ()
    advice = decide(verdict, _context())
    assert advice.action is Action.RESTART and advice.exclude_nodes == ()
    # A node the scheduler reports dead is named by the scheduler's event: still implicated.
    down = dataclasses.replace(
        _event(EvidenceSource.SCHEDULER, "node2"), signature="scheduler.node_down"
    )
    dead = dataclasses.replace(anomaly, nodes=("node2",), evidence=(down,))
    assert verdict_for_anomaly(dead, attributed).implicated.nodes == ("node2",)


# -- the service over a real SQLite store ---------------------------------------------------


def _job(tmp_path: Path, store: Store, sched: FakeScheduler, job_id: str, nodes: list[str]) -> Path:
    out = tmp_path / f"{job_id}.out"
    out.write_text("")
    kernel = {n: tmp_path / f"{n}.kern.log" for n in sched.nodes}
    for path in kernel.values():
        path.touch()
    spec = JobSpec(log_paths=(str(out),), kernel_logs={n: str(p) for n, p in kernel.items()})
    store.register_job(job_id, "fake", now=time.time(), spec=spec)
    sched.add_job(job_id, nodes)
    return out


def _fail(service: Service, sched: FakeScheduler, job_id: str) -> None:
    service.cycle()
    sched.set_state(job_id, JobState.FAILED)
    service.cycle()
    time.sleep(0.6)  # past the engine's settle time
    service.cycle()


def test_a_fake_xid_in_job_output_never_drains_nor_charges_history(tmp_path: Path) -> None:
    # The operator's own repeat-offender count of 1: one charged incident would drain.
    config = Config(
        service=ServiceConfig(mode="action", state_dir=str(tmp_path)),
        policy=PolicyConfig(repeat_offender_count=1),
    )
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    sched = FakeScheduler()
    for job_id in ("7", "8"):
        out = _job(tmp_path, store, sched, job_id, ["node1", "node2"])
        service = Service(config, store, sched, executor_id="trust")
        service.cycle()
        with out.open("a") as f:
            f.write(f"node2: {XID79}\n")  # printed by the job, naming node2
        _fail(service, sched, job_id)
        (incident,) = store.list_incidents(job_id)
        assert incident.category is Category.GPU_HARDWARE
        (advice,) = store.list_advice(job_id)
        assert advice.exclude_nodes == ("node2",) and advice.drain_nodes == ()
    assert not any(call[0] == "drain" for call in sched.calls), sched.calls
    assert store.node_history() == []

    # The same Xid from node2's kernel log is the cluster's word: history, and a drain.
    out = _job(tmp_path, store, sched, "9", ["node2", "node3"])
    service = Service(config, store, sched, executor_id="trust")
    service.cycle()
    with (tmp_path / "node2.kern.log").open("a") as f:
        f.write(f"{datetime.now(UTC).isoformat()} node2 kernel: {XID79}\n")
    _fail(service, sched, "9")
    (charged,) = [e for e in store.node_history() if not e.drained]
    assert (charged.node, charged.strong, charged.job_id) == ("node2", True, "9")
    assert charged.reason == "kernel_log evidence nvrm.xid"
    assert ("drain", "node2") in sched.calls
    store.close()


def test_a_registration_cannot_pass_its_own_output_off_as_a_kernel_log() -> None:
    template = "/var/log/nodes/{node}/kern.log"
    check_kernel_logs({"node1": "/var/log/nodes/node1/kern.log"}, ["/home/a/7.out"], template)
    with pytest.raises(ConfigError, match=r"kernel_logs.node1: '/home/a/7.out' is not node1's"):
        check_kernel_logs({"node1": "/home/a/7.out"}, ["/home/a/7.out"], template)
    # No template configured: any file but the job's own logs.
    check_kernel_logs({"node1": "/var/log/kern.log"}, ["/home/a/7.out"], "")
    with pytest.raises(ConfigError, match=r"is one of the job's own logs"):
        check_kernel_logs({"node1": "/home/a/./7.out"}, ["/home/a/7.out"], "")


def test_a_multi_node_jobs_node_fail_names_no_node_to_drain() -> None:
    # Slurm's NODE_FAIL job state says one of the job's nodes failed, not which one.
    two = job_status_event(JobStatus(5.0, "j", JobState.NODE_FAIL, ("node1", "node2")))
    assert two is not None and two.node is None and two.strong
    verdict = _verdict(two, ())
    assert decide(verdict, _context()).drain_nodes == ()
    one = job_status_event(JobStatus(5.0, "j", JobState.NODE_FAIL, ("node2",)))
    assert one is not None and one.node == "node2"
    single = _context(current_nodes=("node2",))
    assert decide(_verdict(one, ("node2",)), single).drain_nodes == ("node2",)
