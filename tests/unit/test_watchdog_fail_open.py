"""The watchdog fails open (real SQLite store, real hold file, the in-memory scheduler): a
release that fails after a hold leaves the hold open for it, it releases holds when the
database is gone, and a hold on a job no longer held or known is closed after one look."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from trainmedic.core.errors import SchedulerError
from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.executor import Executor
from trainmedic.service.holdfile import HoldFile
from trainmedic.service.watchdog import Watchdog
from trainmedic.store import AdviceMode, Store, sqlite_url

VERDICT = Verdict(True, Kind.CRASH, Category.GPU_HARDWARE, 0.9)


class ReleaseRefused(FakeScheduler):
    """Holds the job (as ``scontrol requeuehold`` does), then the release is refused."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = True

    def requeue(self, job_id: str, exclude_nodes: Sequence[str]) -> None:
        if not self.refuse:
            return super().requeue(job_id, exclude_nodes)
        self.calls.append(("requeue", job_id, *exclude_nodes))
        self.hold(job_id)
        raise SchedulerError(f"scontrol release {job_id}: exit 1: slurmctld busy")


def _held_by_a_failed_requeue(tmp_path: Path) -> tuple[Store, ReleaseRefused, HoldFile]:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    store.register_job("7", "fake", now=0.0)
    incident = store.add_incident("7", 0, VERDICT, detected_at=1.0)
    store.put_advice(
        "7", 0, Advice(Action.RESTART, "x"), mode=AdviceMode.ACTION, now=1.0, incident_id=incident
    )
    sched = ReleaseRefused()
    sched.add_job("7", ["node1", "node2"])
    holds = HoldFile(tmp_path / "holds.json")
    executor = Executor(store, sched, executor_id="e1", hold_file=holds)
    events = executor.step(sched.poll(["7"]), now=2.0)
    assert "error" in [e.what for e in events]
    assert sched.jobs["7"].held
    return store, sched, holds


def test_a_release_that_fails_after_the_hold_keeps_it_open_for_the_watchdog(
    tmp_path: Path,
) -> None:
    store, sched, _ = _held_by_a_failed_requeue(tmp_path)
    assert [h.job_id for h in store.open_holds()] == ["7"]
    watchdog = Watchdog(store, sched, timeout_s=120.0, clock=lambda: 200.0)
    (release,) = watchdog.check()
    assert release.ok and not sched.jobs["7"].held
    assert store.open_holds() == []


def test_the_watchdog_fails_open_when_the_database_is_gone(tmp_path: Path) -> None:
    store, sched, holds = _held_by_a_failed_requeue(tmp_path)
    store.close()
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)  # the database is lost
    (tmp_path / "state.db").mkdir()  # and cannot even be created again

    def open_store() -> Store:
        return Store(sqlite_url(str(tmp_path / "state.db")))

    watchdog = Watchdog(
        None, sched, timeout_s=120.0, clock=lambda: 200.0, hold_file=holds, open_store=open_store
    )
    (release,) = watchdog.check()
    assert release.ok and not sched.jobs["7"].held
    assert holds.holds() == [] and watchdog.check() == []


def test_a_hold_on_a_job_no_longer_held_or_known_is_closed_after_one_look(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    holds = HoldFile(tmp_path / "holds.json")
    sched = FakeScheduler()
    sched.add_job("8", ["node1"])  # running, not held: its requeue went through
    for job in ("8", "9"):  # 9: purged by the scheduler
        store.record_hold(job, held_at=0.0, by="dead")
        holds.add(job, held_at=0.0, by="dead")
    watchdog = Watchdog(store, sched, timeout_s=120.0, clock=lambda: 200.0, hold_file=holds)
    released = watchdog.check()
    assert [(r.job_id, r.ok, r.detail) for r in released] == [
        ("8", True, "job no longer held"),
        ("9", True, "job no longer known"),
    ]
    assert sched.calls == [] and store.open_holds() == [] and holds.holds() == []
    assert watchdog.check() == []


def test_the_hold_file_survives_damage(tmp_path: Path) -> None:
    holds = HoldFile(tmp_path / "holds.json")
    (tmp_path / "holds.json").write_text("{not json")
    assert holds.holds() == []
    holds.add("7", held_at=1.0, by="e1")
    holds.add("7", held_at=5.0, by="e2")  # an open hold is kept as it is
    assert [(h.job_id, h.held_at, h.by) for h in holds.holds()] == [("7", 1.0, "e1")]
    holds.remove("7")
    assert holds.holds() == []


def test_a_drain_is_in_the_node_history_once_whatever_the_store_refused(tmp_path: Path) -> None:
    """The drain's history entry is written with the step's record: a store that refuses the
    record (the service dies there, or the database is locked) leaves neither, and the
    retried step writes both once."""
    import sqlite3

    from trainmedic.core.errors import StoreError

    store = Store(sqlite_url(str(tmp_path / "state.db")))
    store.register_job("7", "fake", now=0.0)
    incident = store.add_incident("7", 0, VERDICT, detected_at=1.0)
    advice = Advice(Action.RESTART_EXCLUDING, "xid 79", ("node2",), ("node2",))
    advice_id = store.put_advice(
        "7", 0, advice, mode=AdviceMode.ACTION, now=1.0, incident_id=incident
    ).id
    assert store.claim_advice(advice_id, "e1")
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    executor = Executor(store, sched, executor_id="e1")
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute(
            "CREATE TRIGGER refuse BEFORE UPDATE OF steps_done ON advice "
            "BEGIN SELECT RAISE(ABORT, 'database is locked'); END"
        )
    with pytest.raises(StoreError):
        executor.step(sched.poll(["7"]), now=2.0)
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("DROP TRIGGER refuse")
    executor.step(sched.poll(["7"]), now=3.0)
    assert [c[0] for c in sched.calls] == ["drain", "drain", "requeue"]  # drain is idempotent
    assert [(e.node, e.drained) for e in store.node_history()] == [("node2", True)]
