"""A restarted service does not take old log lines for news (real SQLite store, real log
files, the in-memory scheduler): it resumes each file where it left it, reads a never-seen
kernel log back only within the look-back window, and never holds what was written before an
attempt started against that attempt."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trainmedic.core.errors import StoreError
from trainmedic.core.model import Category
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig, SourcesConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

SETTLE_S = 0.6  # past the engine's settle time


class Clock:
    """Wall time, moved on by the test instead of sleeping."""

    def __init__(self) -> None:
        self.skew = 0.0

    def __call__(self) -> float:
        return time.time() + self.skew

    def sleep(self, seconds: float) -> None:
        self.skew += seconds


CLOCK = Clock()
XID79 = "NVRM: Xid (PCI:0000:5e:00): 79, pid=9244, name=python, GPU has fallen off the bus."
CUDA_CRASH = "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"


def _config(tmp_path: Path, mode: str = "action") -> Config:
    return Config(
        service=ServiceConfig(mode=mode, state_dir=str(tmp_path)),  # type: ignore[arg-type]
        sources=SourcesConfig(lookback_s=600.0),
    )


def _service(config: Config, store: Store, sched: FakeScheduler, **kw: Any) -> Service:
    return Service(config, store, sched, clock=CLOCK, **kw)


def _cycles(service: Service, n: int = 4) -> list[tuple[int, Category, bool]]:
    out = []
    for _ in range(n):
        out += [
            (d.incident_id, d.finding.verdict.category, d.new) for d in service.cycle().decisions
        ]
        CLOCK.sleep(SETTLE_S)
    return out


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(sqlite_url(str(tmp_path / "state.db")))


def test_a_restarted_service_does_not_read_a_requeued_attempts_crash_again(
    tmp_path: Path, store: Store
) -> None:
    out = tmp_path / "job.out"
    out.write_text("")
    store.register_job("7", "fake", now=time.time(), spec=JobSpec(log_paths=(str(out),)))
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    first = _service(_config(tmp_path), store, sched, executor_id="first")
    first.cycle()
    with out.open("a") as f:
        f.write(CUDA_CRASH)  # no timestamp, no attempt banner: only the offset places it
    assert [d[2] for d in _cycles(first)] == [True]
    assert [c[0] for c in sched.calls] == ["requeue"] and sched.jobs["7"].attempt == 1

    # The service is restarted while attempt 1 runs well: its log holds nothing new.
    again = _cycles(_service(_config(tmp_path), store, sched, executor_id="second"))
    assert again == []
    assert len(store.list_incidents("7")) == 1 and len(store.list_advice("7")) == 1
    assert [c[0] for c in sched.calls] == ["requeue"]

    # What the log gets after the restart is news again.
    third = _service(_config(tmp_path), store, sched, executor_id="third")
    third.cycle()
    with out.open("a") as f:
        f.write(CUDA_CRASH)
    assert [d[2] for d in _cycles(third)] == [True]
    assert [i.attempt for i in store.list_incidents("7")] == [0, 1]


def _job_on_node2(tmp_path: Path, store: Store, kern: Path) -> FakeScheduler:
    out = tmp_path / "job.out"
    out.write_text("")
    spec = JobSpec(log_paths=(str(out),), kernel_logs={"node2": str(kern)})
    store.register_job("7", "fake", now=time.time(), spec=spec)
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    return sched


def test_a_week_old_xid_in_a_kernel_log_never_seen_is_history(tmp_path: Path, store: Store) -> None:
    kern = tmp_path / "kern.log"
    week_ago = time.localtime(time.time() - 7 * 86400)
    syslog = time.strftime("%b %e %H:%M:%S", week_ago)  # no year, local time, as rsyslog
    kern.write_text(
        f"{syslog} node2 kernel: {XID79}\n"
        f"{_iso(time.time() - 5)} node2 kernel: usb 1-1: new high-speed USB device\n"
    )
    sched = _job_on_node2(tmp_path, store, kern)
    assert _cycles(_service(_config(tmp_path), store, sched)) == []
    assert sched.calls == [] and store.node_history("node2") == []


def test_a_kernel_log_untouched_for_longer_than_the_window_is_skipped(
    tmp_path: Path, store: Store
) -> None:
    kern = tmp_path / "kern.log"
    kern.write_text(f"node2 kernel: {XID79}\n")  # undated (a dmesg capture)
    old = time.time() - 3600
    os.utime(kern, (old, old))
    sched = _job_on_node2(tmp_path, store, kern)
    service = _service(_config(tmp_path), store, sched)
    assert _cycles(service) == []
    with kern.open("a") as f:  # written while followed: news, dated or not
        f.write(f"node2 kernel: {XID79}\n")
    decided = _cycles(service)
    assert [(c, new) for _, c, new in decided] == [(Category.GPU_HARDWARE, True)]


def test_kernel_evidence_from_before_the_attempt_started_is_not_held_against_it(
    tmp_path: Path, store: Store
) -> None:
    kern = tmp_path / "kern.log"
    sched = _job_on_node2(tmp_path, store, kern)
    store.register_job("7", "fake", now=time.time(), spec=JobSpec())  # no kernel log yet
    _service(_config(tmp_path), store, sched).cycle()  # attempt 0 starts now
    (attempt,) = store.list_attempts("7")
    # node2's kernel log, first followed after a restart, holds an Xid from 2 minutes before
    # the attempt started (inside the look-back window): the GPU of the job before.
    kern.write_text(f"{_iso(attempt.started_at - 120)} node2 kernel: {XID79}\n")
    restarted = _service(_config(tmp_path), store, sched, kernel_logs={"node2": str(kern)})
    assert _cycles(restarted) == []
    assert sched.calls == []
    # The same Xid written once the attempt runs is evidence against it.
    with kern.open("a") as f:
        f.write(f"{_iso(time.time())} node2 kernel: {XID79}\n")
    decided = _cycles(restarted)
    assert [(c, new) for _, c, new in decided] == [(Category.GPU_HARDWARE, True)]


def test_a_kernel_line_is_blamed_on_the_node_whose_log_it_is(tmp_path: Path, store: Store) -> None:
    kern = tmp_path / "kern.log"
    kern.write_text("")
    sched = _job_on_node2(tmp_path, store, kern)
    service = _service(_config(tmp_path, mode="monitor"), store, sched)
    service.cycle()
    with kern.open("a") as f:  # relayed text naming another host
        f.write(f"{_iso(time.time())} node2 kernel: srun: error: node1: task 3: Out Of Memory\n")
    (decision,) = _cycles(service)
    (incident,) = store.list_incidents("7")
    assert incident.implicated.nodes == ("node2",)
    # An application OOM charges no node's history (core.policy.trust); never node1's.
    assert "node1" not in [e.node for e in store.node_history()]
    assert decision[2], "stored as a new incident"


def test_a_finding_the_store_refused_is_stored_on_the_next_cycle(
    tmp_path: Path, store: Store
) -> None:
    out = tmp_path / "job.out"
    out.write_text("")
    store.register_job("7", "fake", now=time.time(), spec=JobSpec(log_paths=(str(out),)))
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    service = _service(_config(tmp_path, mode="monitor"), store, sched)
    service.cycle()
    with out.open("a") as f:
        f.write(CUDA_CRASH)
    service.cycle()
    CLOCK.sleep(SETTLE_S)
    with sqlite3.connect(tmp_path / "state.db") as db:  # "disk full" for one cycle
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON incidents "
            "BEGIN SELECT RAISE(ABORT, 'full'); END"
        )
    try:
        refused = service.cycle().decisions
    except StoreError:  # how the loop lost it before: the cycle died with the finding in it
        refused = []
    assert refused == [] and store.list_incidents("7") == []
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("DROP TRIGGER refuse")
    stored = service.cycle().decisions
    assert [d.new for d in stored] == [True]
    assert len(store.list_incidents("7")) == 1


def test_a_decision_and_its_node_history_are_stored_together(tmp_path: Path, store: Store) -> None:
    kern = tmp_path / "kern.log"
    kern.write_text("")
    sched = _job_on_node2(tmp_path, store, kern)
    service = _service(_config(tmp_path, mode="monitor"), store, sched)
    service.cycle()
    with kern.open("a") as f:
        f.write(f"{_iso(CLOCK())} node2 kernel: {XID79}\n")
    service.cycle()
    CLOCK.sleep(SETTLE_S)
    with sqlite3.connect(tmp_path / "state.db") as db:  # the history write is refused once
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON node_history "
            "BEGIN SELECT RAISE(ABORT, 'database is locked'); END"
        )
    with contextlib.suppress(StoreError):  # how it failed before; now kept for next cycle
        service.cycle()
    assert store.list_incidents("7") == [], "all of the decision or none of it"
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("DROP TRIGGER refuse")
    service.cycle()
    (incident,) = store.list_incidents("7")
    assert [(e.node, e.incident_id) for e in store.node_history()] == [("node2", incident.id)]
