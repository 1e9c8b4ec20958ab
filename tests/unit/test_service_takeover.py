"""A standby that takes the lead starts where the store says the old leader left off, as a
restarted service would: the old leader's log offsets and the attempt it saw start, not its
own copies from when it started (real SQLite store and log files, the in-memory scheduler)."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from pathlib import Path

from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url
from trainmedic.store.leader import leadership_for


def _report(log: Path, iterations: range) -> None:
    with log.open("a") as f:
        for i in iterations:
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            f.write(f"{stamp} [rank0] node=node1 iter={i} loss=0.5\n")


def test_a_standby_taking_the_lead_reads_on_from_the_old_leaders_offsets(tmp_path: Path) -> None:
    config = Config(service=ServiceConfig(mode="action", state_dir=str(tmp_path)))
    url = sqlite_url(str(tmp_path / "state.db"))
    log = tmp_path / "job.out"
    log.write_text("")
    store_a, store_b = Store(url), Store(url)
    store_a.register_job("7", "fake", now=time.time(), spec=JobSpec(log_paths=(str(log),)))
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    lead_a = leadership_for(store_a)
    a = Service(config, store_a, sched, executor_id="a", leadership=lead_a)
    b = Service(config, store_b, sched, executor_id="b", leadership=leadership_for(store_b))
    a.cycle()
    b.cycle()
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
