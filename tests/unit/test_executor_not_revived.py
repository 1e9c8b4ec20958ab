"""Finished jobs are not revived (real SQLite store, the in-memory scheduler): a job that
completed, that its user cancelled, or that the scheduler no longer knows is never requeued
by id, and its advice is abandoned at the first check instead of retried until the timeout."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.executor import Executor
from trainmedic.store import AdviceMode, AdviceStatus, Store, sqlite_url

VERDICT = Verdict(True, Kind.CRASH, Category.GPU_HARDWARE, 0.9)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(sqlite_url(str(tmp_path / "state.db")))
    s.register_job("7", "fake", now=0.0)
    return s


def _advise(store: Store, advice: Advice) -> int:
    incident = store.add_incident("7", 0, VERDICT, detected_at=1.0)
    return store.put_advice(
        "7", 0, advice, mode=AdviceMode.ACTION, now=1.0, incident_id=incident
    ).id


@pytest.mark.parametrize(
    ("state", "why"),
    [(JobState.COMPLETED, "ended (COMPLETED)"), (JobState.CANCELLED, "cancelled by its user")],
)
def test_a_job_that_is_over_is_not_requeued(store: Store, state: JobState, why: str) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"], state)
    advice_id = _advise(store, Advice(Action.RESTART_EXCLUDING, "xid 79", ("node2",), ("node2",)))
    events = Executor(store, sched, executor_id="e1").step(sched.poll(["7"]), now=2.0)
    assert [e.what for e in events] == ["claimed", "step:drain:node2", "abandoned"]
    assert sched.calls == [("drain", "node2")], "the node's evidence stands, the job stays over"
    assert sched.jobs["7"].state is state and sched.jobs["7"].attempt == 0
    advice = store.get_advice(advice_id)
    assert advice.status is AdviceStatus.ABANDONED and why in advice.note


def test_a_job_the_scheduler_forgot_is_abandoned_after_one_check(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    sched = FakeScheduler()  # job 7 ended long ago: no longer listed
    advice_id = _advise(store, Advice(Action.RESTART, "hang"))
    executor = Executor(store, sched, executor_id="e1", converge_timeout_s=180.0)
    with caplog.at_level(logging.INFO, logger="trainmedic.service.executor"):
        first = executor.step(sched.poll(["7"]), now=2.0)
        later = [executor.step(sched.poll(["7"]), now=2.0 + i) for i in range(1, 20)]
    assert [e.what for e in first] == ["claimed", "abandoned"]
    assert later == [[]] * 19 and sched.calls == []
    assert store.get_advice(advice_id).status is AdviceStatus.ABANDONED
    assert len([r for r in caplog.records if "advice" in r.getMessage()]) == 1, "no storm"


def test_a_job_gone_after_its_requeue_is_abandoned_not_awaited(store: Store) -> None:
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    advice_id = _advise(store, Advice(Action.RESTART, "hang"))
    executor = Executor(store, sched, executor_id="e1", converge_timeout_s=180.0)
    executor.step(sched.poll(["7"]), now=2.0)
    del sched.jobs["7"]  # purged by the scheduler before it converged
    assert [e.what for e in executor.step(sched.poll(["7"]), now=3.0)] == ["abandoned"]
    assert store.get_advice(advice_id).status is AdviceStatus.ABANDONED
