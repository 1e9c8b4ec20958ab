"""Executor and watchdog over a real SQLite store and the in-memory scheduler."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.executor import Executor
from trainmedic.service.watchdog import Watchdog
from trainmedic.store import AdviceMode, AdviceStatus, Store, sqlite_url

VERDICT = Verdict(True, Kind.CRASH, Category.GPU_HARDWARE, 0.9)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(sqlite_url(str(tmp_path / "state.db")))
    s.register_job("7", "fake", now=0.0)
    return s


def _advise(store: Store, advice: Advice, mode: AdviceMode = AdviceMode.ACTION) -> int:
    incident = store.add_incident("7", 0, VERDICT, detected_at=1.0)
    return store.put_advice("7", 0, advice, mode=mode, now=1.0, incident_id=incident).id


def test_restart_excluding_drains_requeues_once_and_converges(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    advice_id = _advise(store, Advice(Action.RESTART_EXCLUDING, "xid 79", ("node2",), ("node2",)))
    executor = Executor(store, sched, executor_id="e1")
    events = executor.step(sched.poll(["7"]), now=2.0)
    assert [e.what for e in events] == ["claimed", "step:drain:node2", "step:requeue", "applied"]
    assert sched.calls == [("drain", "node2"), ("requeue", "7", "node2")]
    assert "node2" not in sched.jobs["7"].nodes and sched.jobs["7"].attempt == 1
    # Convergence is read from the next poll, never assumed from the call.
    assert [e.what for e in executor.step(sched.poll(["7"]), now=3.0)] == ["converged"]
    record = store.get_advice(advice_id)
    assert record.status is AdviceStatus.CONVERGED and record.converged_at == 3.0
    # Running again changes nothing: exactly once.
    executor.step(sched.poll(["7"]), now=4.0)
    assert len(sched.calls) == 2
    assert [e.node for e in store.node_history() if e.drained] == ["node2"]


def test_restarted_executor_does_not_repeat_a_requeue_it_already_issued(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    advice_id = _advise(store, Advice(Action.RESTART, "hang"))
    assert store.claim_advice(advice_id, "e1")
    sched.requeue("7", ())  # issued, then the service died before recording it
    sched.calls.clear()
    Executor(store, sched, executor_id="e1").step(sched.poll(["7"]), now=5.0)
    assert sched.calls == []
    assert store.get_advice(advice_id).status is AdviceStatus.CONVERGED


def test_second_executor_never_applies_claimed_advice(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    _advise(store, Advice(Action.RESTART, "unknown"))
    first = Executor(store, sched, executor_id="e1")
    second = Executor(store, sched, executor_id="e2")
    snapshot = sched.poll(["7"])
    first.step(snapshot, now=2.0)
    second_events = second.step(sched.poll(["7"]), now=2.1)
    assert second_events == []
    assert [c[0] for c in sched.calls] == ["requeue"]


def test_monitor_advice_is_never_executed(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    advice_id = _advise(
        store, Advice(Action.RESTART_EXCLUDING, "x", ("node2",), ("node2",)), AdviceMode.MONITOR
    )
    assert Executor(store, sched, executor_id="e1").step(sched.poll(["7"]), now=2.0) == []
    assert sched.calls == []
    assert store.get_advice(advice_id).status is AdviceStatus.RECORDED


def test_stale_snapshot_issues_nothing(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    _advise(store, Advice(Action.RESTART, "x"))
    sched.stale = True
    Executor(store, sched, executor_id="e1").step(sched.poll(["7"]), now=2.0)
    assert sched.calls == []


def test_scheduler_error_retries_then_abandons(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    advice_id = _advise(store, Advice(Action.RESTART, "x"))
    executor = Executor(store, sched, executor_id="e1", converge_timeout_s=30.0)
    sched.fail_next = "requeue"
    events = executor.step(sched.poll(["7"]), now=2.0)
    assert "error" in [e.what for e in events]
    assert store.get_advice(advice_id).status is AdviceStatus.APPLYING
    executor.step(sched.poll(["7"]), now=3.0)  # retried and issued
    executor.step(sched.poll(["7"]), now=4.0)  # the scheduler shows it
    assert store.get_advice(advice_id).status is AdviceStatus.CONVERGED


def test_stop_is_recorded_unless_enforced(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"], JobState.FAILED)
    _advise(store, Advice(Action.STOP, "deterministic"))
    Executor(store, sched, executor_id="e1").step(sched.poll(["7"]), now=2.0)
    assert sched.calls == []
    store.register_job("8", "fake", now=0.0)
    sched.add_job("8", ["node3"], JobState.RUNNING)
    incident = store.add_incident("8", 0, VERDICT, detected_at=1.0)
    store.put_advice(
        "8", 0, Advice(Action.STOP, "d"), mode=AdviceMode.ACTION, now=1, incident_id=incident
    )
    Executor(store, sched, executor_id="e1", stop_enforcement=True).step(sched.poll(["8"]), now=2.0)
    assert ("cancel", "8") in sched.calls
    assert sched.jobs["8"].state is JobState.CANCELLED


def test_watchdog_releases_only_old_holds(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1"])
    sched.hold("7")
    store.record_hold("7", held_at=100.0, by="dead-service")
    clock = [110.0]
    watchdog = Watchdog(store, sched, timeout_s=30.0, clock=lambda: clock[0])
    assert watchdog.check() == []
    clock[0] = 131.0
    released = watchdog.check()
    assert [r.job_id for r in released] == ["7"] and released[0].ok
    assert sched.jobs["7"].held is False
    assert store.open_holds() == []
    assert watchdog.check() == []  # once


def test_watchdog_keeps_hold_when_release_fails(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1"])
    sched.hold("7")
    store.record_hold("7", held_at=0.0, by="dead")
    sched.fail_next = "release"
    watchdog = Watchdog(store, sched, timeout_s=1.0, clock=lambda: 10.0)
    assert not watchdog.check()[0].ok
    assert len(store.open_holds()) == 1
    assert watchdog.check()[0].ok


def test_two_advices_for_one_attempt_requeue_it_once_even_in_one_cycle(store: Store) -> None:
    # A service killed while applying advice 1 re-derives a second incident for the same
    # attempt after its restart: both advices are active in the same executor step, whose
    # snapshot still shows the old attempt.
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    first = _advise(store, Advice(Action.RESTART_EXCLUDING, "xid 79", ("node2",)))
    assert store.claim_advice(first, "e1")
    other = Verdict(True, Kind.HANG, Category.UNKNOWN, 0.4)
    incident = store.add_incident("7", 0, other, detected_at=2.0)
    second = store.put_advice(
        "7", 0, Advice(Action.RESTART, "cascade"), mode=AdviceMode.ACTION, now=2.0,
        incident_id=incident,
    ).id  # fmt: skip
    snapshot = sched.poll(["7"])
    events = Executor(store, sched, executor_id="e1").step(snapshot, now=3.0)
    assert [c[0] for c in sched.calls] == ["requeue"]
    assert sched.jobs["7"].attempt == 1
    skipped = [e for e in events if e.advice_id == second and e.what == "step:requeue"]
    assert skipped and skipped[0].detail == f"already requeued by advice {first}"


def test_a_requeue_cut_short_after_its_hold_is_finished_not_repeated(store: Store) -> None:
    # The killed service had drained, held the job (Slurm's requeuehold: attempt 1, held)
    # and died before the exclusion and the release.
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    advice_id = _advise(store, Advice(Action.RESTART_EXCLUDING, "xid 79", ("node2",)))
    assert store.claim_advice(advice_id, "e1")
    store.record_hold("7", held_at=1.5, by="e1")
    sched.hold("7")
    sched.jobs["7"] = dataclasses.replace(sched.jobs["7"], attempt=1)
    sched.calls.clear()
    executor = Executor(store, sched, executor_id="e1")
    events = executor.step(sched.poll(["7"]), now=2.0)
    assert ("step:requeue", "requeued excluding node2") in [(e.what, e.detail) for e in events]
    job = sched.jobs["7"]
    assert (job.attempt, job.held, job.excluded_nodes) == (1, False, ("node2",))
    assert store.open_holds() == []


def test_an_already_finished_requeue_closes_the_hold_its_crash_left_open(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    advice_id = _advise(store, Advice(Action.RESTART, "hang"))
    assert store.claim_advice(advice_id, "e1")
    store.record_hold("7", held_at=1.5, by="e1")
    sched.requeue("7", ())  # issued and released; the service died before recording either
    sched.calls.clear()
    Executor(store, sched, executor_id="e1").step(sched.poll(["7"]), now=2.0)
    assert sched.calls == [] and store.open_holds() == []
