"""A standby that takes the lead starts where the store says the old leader left off, as a
restarted service would: the old leader's log offsets and the attempt it saw start, not its
own copies from when it started (real SQLite store and log files, the in-memory scheduler)."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from pathlib import Path

from trainmedic.core.model import Action
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import (
    Config,
    SchedulerConfig,
    ServiceConfig,
    SlurmConfig,
)
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url
from trainmedic.store.leader import Leadership, leadership_for


@dataclasses.dataclass
class _Pair:
    sched: FakeScheduler
    a: Service
    b: Service
    store_a: Store
    store_b: Store
    lead_a: Leadership


def _leader_and_standby(config: Config, tmp_path: Path, spec: JobSpec) -> _Pair:
    """Job 7 on node1+node2 in one SQLite store, leader ``a`` (first to cycle), standby ``b``."""
    url = sqlite_url(str(tmp_path / "state.db"))
    store_a, store_b = Store(url), Store(url)
    store_a.register_job("7", "fake", now=time.time(), spec=spec)
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    lead_a = leadership_for(store_a)
    a = Service(config, store_a, sched, executor_id="a", leadership=lead_a)
    b = Service(config, store_b, sched, executor_id="b", leadership=leadership_for(store_b))
    a.cycle()
    b.cycle()
    return _Pair(sched, a, b, store_a, store_b, lead_a)


def _report(log: Path, iterations: range, ago_s: float = 0.0) -> None:
    """Progress lines of rank 0, printed ``ago_s`` before now."""
    with log.open("a") as f:
        for i in iterations:
            at = datetime.fromtimestamp(time.time() - ago_s, UTC)
            stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            f.write(f"{stamp} [rank0] node=node1 iter={i} loss=0.5\n")


def test_a_standby_taking_the_lead_reads_on_from_the_old_leaders_offsets(tmp_path: Path) -> None:
    config = Config(service=ServiceConfig(mode="action", state_dir=str(tmp_path)))
    log = tmp_path / "job.out"
    log.write_text("")
    pair = _leader_and_standby(config, tmp_path, JobSpec(log_paths=(str(log),)))
    sched, a, b, lead_a = pair.sched, pair.a, pair.b, pair.lead_a
    _store_a, store_b = pair.store_a, pair.store_b
    assert a.leading and not b.leading

    _report(log, range(1, 30))  # attempt 0 trains; the leader reads it all
    a.cycle()
    # Slurm replaces the attempt (a requeue); the leader sees attempt 1 start, which has
    # printed nothing yet, and stores how far it read.
    sched.set_state("7", JobState.PENDING)
    a.cycle()
    sched.jobs["7"] = dataclasses.replace(
        sched.jobs["7"], state=JobState.RUNNING, attempt=1, nodes=("node3", "node4")
    )
    a.cycle()

    lead_a.release()  # the leader dies
    b.cycle()
    assert b.leading
    # Attempt 0's reports are not read again as attempt 1's first progress.
    (attempt1,) = [x for x in store_b.list_attempts("7") if x.attempt == 1]
    assert attempt1.first_progress_at is None
    assert b.engine.progress_of("7") == (None, None)


def test_a_failure_the_old_leader_saw_but_did_not_store_is_found_by_the_next(
    tmp_path: Path,
) -> None:
    """The old leader saw the job fail and made its finding, then died before the incident
    was stored (kill -9 at the store write): the job's ended state must not be stored before
    the finding, or the next leader takes the job for one that ended long ago, lets it go,
    and the incident is lost."""
    config = Config(service=ServiceConfig(mode="action", state_dir=str(tmp_path)))
    kernel = tmp_path / "node2.kern.log"
    kernel.write_text("")
    log = tmp_path / "job.out"
    log.write_text("")
    spec = JobSpec(log_paths=(str(log),), kernel_logs={"node2": str(kernel)})
    pair = _leader_and_standby(config, tmp_path, spec)
    sched, a, b, lead_a = pair.sched, pair.a, pair.b, pair.lead_a
    store_a, store_b = pair.store_a, pair.store_b
    _report(log, range(1, 5))
    a.cycle()

    stamp = datetime.now(UTC).isoformat()
    with kernel.open("a") as f:
        f.write(
            f"{stamp} node2 kernel: NVRM: Xid (PCI:0000:5e:00): 79, pid=9244, name=python, "
            "GPU has fallen off the bus.\n"
        )
    sched.set_state("7", JobState.FAILED)
    a.cycle()  # the failure seen; its finding settles: nothing stored yet
    assert store_a.list_incidents("7") == []

    lead_a.release()  # the leader dies before its next cycle
    b.cycle()
    assert b.leading
    time.sleep(0.6)  # past the engine's settle time
    (decision,) = b.cycle().decisions
    assert decision.finding.verdict.implicated.nodes == ("node2",)
    assert decision.advice.action is Action.RESTART_EXCLUDING
    # Once the incident is stored, the ended state is too.
    assert store_b.get_job("7") is not None and store_b.get_job("7").state == "FAILED"


def _node_death_setup(
    tmp_path: Path,
) -> tuple[FakeScheduler, Service, Service, Store, Leadership, Path]:
    """Job 7 trains on node1+node2 under leader ``a`` (standby ``b``); kernel logs come from
    the config's template, as for discovered jobs: a node is followed while a job runs on it."""
    config = Config(
        service=ServiceConfig(mode="action", state_dir=str(tmp_path)),
        scheduler=SchedulerConfig(
            slurm=SlurmConfig(kernel_log_template=str(tmp_path / "{node}.kern.log"))
        ),
    )
    for node in ("node1", "node2", "node3", "node4"):
        (tmp_path / f"{node}.kern.log").write_text("")
    log = tmp_path / "job.out"
    log.write_text("")
    pair = _leader_and_standby(config, tmp_path, JobSpec(log_paths=(str(log),)))
    sched, a, b, lead_a = pair.sched, pair.a, pair.b, pair.lead_a
    store_a, store_b = pair.store_a, pair.store_b
    _report(log, range(1, 5), ago_s=40.0)
    a.cycle()
    # node2's GPU falls off the bus and the node dies; Slurm requeues the job by itself (a
    # --requeue job after NODE_FAIL). The lost attempt's last reports, printed before it
    # died, reach the log late.
    with (tmp_path / "node2.kern.log").open("a") as f:
        f.write(
            f"{datetime.now(UTC).isoformat()} node2 kernel: NVRM: Xid (PCI:0000:5e:00): 79, "
            "pid=9244, name=python, GPU has fallen off the bus.\n"
        )
    sched.nodes["node2"] = dataclasses.replace(sched.nodes["node2"], state=NodeState.DOWN)
    sched.jobs["7"] = dataclasses.replace(
        sched.jobs["7"], state=JobState.PENDING, attempt=1, nodes=()
    )
    _report(log, range(5, 8), ago_s=30.0)
    a.cycle()  # the node death's finding settles; the log's offset is held back for it
    # The new attempt starts on other nodes and is stored at once.
    sched.jobs["7"] = dataclasses.replace(
        sched.jobs["7"], state=JobState.RUNNING, attempt=1, nodes=("node3", "node4")
    )
    a.cycle()
    assert [x.attempt for x in store_a.list_attempts("7")] == [0, 1]
    return sched, a, b, store_b, lead_a, log


def test_a_node_death_the_old_leader_saw_but_did_not_store_is_found_by_the_next(
    tmp_path: Path,
) -> None:
    """Slurm requeued the job by itself when a node died; the old leader stored the new
    attempt, then died before the incident of the lost attempt was stored. That finding rests
    on the lost attempt's nodes and when it ended: the next leader must have them from the
    store (not only the attempt running now), or the dead node is no node of the job's and
    the incident is lost."""
    _sched, a, b, store_b, lead_a, _log = _node_death_setup(tmp_path)
    assert store_b.list_incidents("7") == []

    lead_a.release()  # the leader dies before its next cycle
    b.cycle()
    assert b.leading
    time.sleep(0.6)  # past the engine's settle time
    (decision,) = b.cycle().decisions
    assert decision.finding.attempt == 0
    assert decision.finding.verdict.implicated.nodes == ("node2",)
    # The lost attempt's nodes' kernel logs are still read: the Xid is in the evidence.
    assert any("Xid" in e.text for e in decision.finding.evidence)
    (incident,) = store_b.list_incidents("7")
    assert incident.attempt == 0
    # The lost attempt's reports, read again (the offset was held back for the finding), are
    # not the new attempt's progress: printed before it started, read as the lead was taken.
    (attempt1,) = [x for x in store_b.list_attempts("7") if x.attempt == 1]
    assert attempt1.first_progress_at is None
    assert b.engine.progress_of("7") == (None, None)
    a.close()
    b.close()


def test_a_node_death_the_old_leader_stored_is_not_found_again(tmp_path: Path) -> None:
    """The same, but the old leader stored the incident before it died: the next leader,
    which meets the dead node within the requeue grace, makes no second incident of it."""
    _sched, a, b, store_b, lead_a, _log = _node_death_setup(tmp_path)
    time.sleep(0.6)
    (stored,) = a.cycle().decisions
    assert stored.finding.verdict.implicated.nodes == ("node2",)

    lead_a.release()
    b.cycle()
    assert b.leading
    time.sleep(0.6)
    assert [d for d in b.cycle().decisions if d.new] == []
    assert len(store_b.list_incidents("7")) == 1
    a.close()
    b.close()
