"""Leader election on the store: one of several services acts; the lock file survives
nothing but its holder (kill -9 releases it); a standby that takes the lead adopts the advice
in progress and issues no step twice (real SQLite, real lock files, real processes)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from trainmedic.core.model import Category
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import AdviceStatus, JobSpec, Store, sqlite_url
from trainmedic.store.leader import FileLeadership, SoleLeader, leadership_for

SETTLE_S = 0.6


def test_one_file_lock_one_leader(tmp_path: Path) -> None:
    lock = tmp_path / "state.db.leader"
    first, second = FileLeadership(lock), FileLeadership(lock)
    assert first.hold() and first.hold()
    assert not second.hold()
    first.release()
    assert second.hold() and not first.hold()


def test_kill_9_of_the_holder_frees_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "state.db.leader"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from trainmedic.store.leader import FileLeadership\n"
            f"assert FileLeadership(Path({str(lock)!r})).hold()\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        standby = FileLeadership(lock)
        assert not standby.hold()
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        assert standby.hold()
    finally:
        holder.kill()


def test_the_election_fits_the_database(tmp_path: Path) -> None:
    assert isinstance(leadership_for(Store("sqlite://")), SoleLeader)
    election = leadership_for(Store(sqlite_url(str(tmp_path / "s.db"))))
    assert isinstance(election, FileLeadership) and election.path == tmp_path / "s.db.leader"


def _xid(kernel: Path) -> None:
    stamp = datetime.now(UTC).isoformat()
    with kernel.open("a") as f:
        f.write(
            f"{stamp} node2 kernel: NVRM: Xid (PCI:0000:5e:00): 79, pid=9244, name=python, "
            "GPU has fallen off the bus.\n"
        )


def test_only_the_leader_acts_and_a_standby_finishes_its_advice(tmp_path: Path) -> None:
    config = Config(service=ServiceConfig(mode="action", state_dir=str(tmp_path)))
    url = sqlite_url(str(tmp_path / "state.db"))
    kernel = {n: tmp_path / f"{n}.kern.log" for n in ("node1", "node2")}
    for path in kernel.values():
        path.write_text("")
    (tmp_path / "job.out").write_text("")
    spec = JobSpec(
        log_paths=(str(tmp_path / "job.out"),),
        kernel_logs={n: str(p) for n, p in kernel.items()},
    )
    store_a, store_b = Store(url), Store(url)
    store_a.register_job("7", "fake", now=time.time(), spec=spec)
    sched = FakeScheduler()  # one cluster, seen by both services
    sched.add_job("7", ["node1", "node2"])
    lead_a, lead_b = leadership_for(store_a), leadership_for(store_b)
    a = Service(config, store_a, sched, executor_id="a", leadership=lead_a)
    b = Service(config, store_b, sched, executor_id="b", leadership=lead_b)
    a.cycle()
    b.cycle()
    assert a.leading and not b.leading

    # The leader decides; its requeue is refused once, so its advice stays "applying".
    _xid(kernel["node2"])
    sched.set_state("7", JobState.FAILED)
    sched.fail_next = "requeue"
    a.cycle()
    time.sleep(SETTLE_S)
    decided = a.cycle().decisions
    assert [d.finding.verdict.category for d in decided] == [Category.GPU_HARDWARE]
    assert b.cycle().decisions == [] and b.cycle().executed == []
    (advice,) = store_a.list_advice("7")
    advice = store_a.get_advice(advice.id)
    assert advice.status is AdviceStatus.APPLYING and advice.claimed_by == "a"
    assert advice.steps_done == ("drain:node2",)

    # The leader dies (its lock goes with it); the standby takes over the advice and issues
    # only what is left: the requeue, never a second drain.
    lead_a.release()
    b.cycle()
    assert b.leading
    advice = store_b.get_advice(advice.id)
    assert advice.claimed_by == "b"
    assert sched.calls.count(("drain", "node2")) == 1
    assert [c for c in sched.calls if c[0] == "requeue"][-1] == ("requeue", "7", "node2")
    assert "requeue" in advice.steps_done
    b.cycle()
    assert sched.jobs["7"].attempt == 1 and sched.calls.count(("drain", "node2")) == 1
