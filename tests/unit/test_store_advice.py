"""Store: advice generations, exactly-once claims, step recording, status transitions."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest

from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.store import (
    AdviceMode,
    AdviceStatus,
    InvalidTransition,
    NotFound,
    Store,
    sqlite_url,
)

RESTART = Advice(Action.RESTART_EXCLUDING, "xid79 on node2", ("node2",), ("node2",))
STOP = Advice(Action.STOP, "deterministic application error")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return sqlite_url(str(tmp_path / "tm.db"))


@pytest.fixture
def store(url: str) -> Store:
    return Store(url)


def test_generations_count_per_job_and_attempt(store: Store) -> None:
    a = store.put_advice("j1", 0, RESTART, mode=AdviceMode.MONITOR, now=1.0)
    b = store.put_advice("j1", 0, STOP, mode=AdviceMode.MONITOR, now=2.0)
    c = store.put_advice("j1", 1, STOP, mode=AdviceMode.MONITOR, now=3.0)
    d = store.put_advice("j2", 0, STOP, mode=AdviceMode.MONITOR, now=4.0)
    assert [x.generation for x in (a, b, c, d)] == [1, 2, 1, 1]
    assert a.status is AdviceStatus.RECORDED and a.exclude_nodes == ("node2",)
    assert store.active_advice() == []  # monitor mode: nothing for an executor


def test_advice_is_idempotent_per_incident(store: Store) -> None:
    first = store.put_advice("j1", 0, RESTART, mode=AdviceMode.ACTION, now=1.0, incident_id=None)
    assert first.incident_id is None
    verdict = Verdict(failure=True, kind=Kind.CRASH, category=Category.UNKNOWN, confidence=0.3)
    incident = store.add_incident("j1", 0, verdict, detected_at=1.0)
    a = store.put_advice("j1", 0, RESTART, mode=AdviceMode.ACTION, now=2.0, incident_id=incident)
    again = store.put_advice("j1", 0, STOP, mode=AdviceMode.ACTION, now=3.0, incident_id=incident)
    assert again == a
    assert len(store.list_advice("j1")) == 2


def test_new_generation_supersedes_pending_advice(store: Store) -> None:
    old = store.put_advice("j1", 0, RESTART, mode=AdviceMode.ACTION, now=1.0)
    new = store.put_advice("j1", 0, STOP, mode=AdviceMode.ACTION, now=2.0)
    assert store.get_advice(old.id).status is AdviceStatus.ABANDONED
    assert "superseded" in store.get_advice(old.id).note
    assert [a.id for a in store.active_advice("j1")] == [new.id]


def test_claim_is_exclusive_and_reentrant_for_the_same_executor(store: Store) -> None:
    adv = store.put_advice("j1", 0, RESTART, mode=AdviceMode.ACTION, now=1.0)
    assert store.claim_advice(adv.id, "exec-a")
    assert not store.claim_advice(adv.id, "exec-b")
    assert store.claim_advice(adv.id, "exec-a")  # a restart of the same executor resumes it
    got = store.get_advice(adv.id)
    assert (got.status, got.claimed_by) == (AdviceStatus.APPLYING, "exec-a")
    recorded = store.put_advice("j2", 0, STOP, mode=AdviceMode.MONITOR, now=1.0)
    assert not store.claim_advice(recorded.id, "exec-a")  # monitor advice is never applied
    assert not store.claim_advice(999, "exec-a")


def test_claim_exactly_once_under_concurrent_threads(store: Store) -> None:
    advice_ids = [
        store.put_advice(f"j{i}", 0, RESTART, mode=AdviceMode.ACTION, now=1.0).id for i in range(20)
    ]
    wins: list[tuple[str, int]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def claimer(name: str) -> None:
        barrier.wait()
        for advice_id in advice_ids:
            if store.claim_advice(advice_id, name):
                with lock:
                    wins.append((name, advice_id))

    threads = [threading.Thread(target=claimer, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(advice_id for _, advice_id in wins) == advice_ids


def _claim_all(url: str, name: str, advice_ids: list[int], start: object) -> None:
    store = Store(url)
    start.wait()  # type: ignore[attr-defined]
    for advice_id in advice_ids:
        store.claim_advice(advice_id, name)


def test_claim_exactly_once_under_concurrent_processes(store: Store, url: str) -> None:
    advice_ids = [
        store.put_advice(f"j{i}", 0, RESTART, mode=AdviceMode.ACTION, now=1.0).id for i in range(20)
    ]
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [
        ctx.Process(target=_claim_all, args=(url, f"p{i}", advice_ids, start)) for i in range(3)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    owners = [store.get_advice(i).claimed_by for i in advice_ids]
    assert all(owner in {"p0", "p1", "p2"} for owner in owners)
    assert all(store.get_advice(i).status is AdviceStatus.APPLYING for i in advice_ids)


def test_steps_are_recorded_once(store: Store) -> None:
    adv = store.put_advice("j1", 0, RESTART, mode=AdviceMode.ACTION, now=1.0)
    assert store.mark_step_done(adv.id, "hold")
    assert not store.mark_step_done(adv.id, "hold")
    assert store.mark_step_done(adv.id, "exclude:node2")
    assert store.get_advice(adv.id).steps_done == ("hold", "exclude:node2")
    with pytest.raises(NotFound):
        store.mark_step_done(12345, "hold")


def test_transitions(store: Store) -> None:
    adv = store.put_advice("j1", 0, RESTART, mode=AdviceMode.ACTION, now=1.0)
    with pytest.raises(InvalidTransition, match="pending -> converged is not allowed"):
        store.set_advice_status(adv.id, AdviceStatus.CONVERGED, now=2.0)
    assert store.claim_advice(adv.id, "exec")
    back = store.set_advice_status(adv.id, AdviceStatus.PENDING, now=2.5, note="scheduler down")
    assert back.claimed_by is None and back.note == "scheduler down"
    assert store.claim_advice(adv.id, "exec")
    store.mark_applied(adv.id, now=3.0)
    store.mark_applied(adv.id, now=4.0)  # the first time is kept
    done = store.set_advice_status(adv.id, AdviceStatus.CONVERGED, now=5.0)
    assert (done.applied_at, done.converged_at) == (3.0, 5.0)
    again = store.set_advice_status(adv.id, AdviceStatus.CONVERGED, now=9.0)
    assert again.converged_at == 5.0  # idempotent
    with pytest.raises(InvalidTransition):
        store.set_advice_status(adv.id, AdviceStatus.ABANDONED, now=9.0)
    recorded = store.put_advice("j2", 0, STOP, mode=AdviceMode.MONITOR, now=1.0)
    with pytest.raises(InvalidTransition):
        store.set_advice_status(recorded.id, AdviceStatus.APPLYING, now=2.0)
