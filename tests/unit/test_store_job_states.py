"""Store: what one scheduler poll changed of many jobs, in one transaction
(``record_job_states``), against the calls it replaces; and the service makes one such write
per poll (real SQLite, the in-memory scheduler)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, JobStateChange, NotFound, Store, sqlite_url

CHANGES = [
    JobStateChange("a", "RUNNING", 0, 10.0, nodes=("n1",), started=True),
    JobStateChange("b", "PENDING", 0, 10.0),
    JobStateChange("a", "REQUEUED", 1, 20.0, ended=(0, "REQUEUED")),
    JobStateChange("a", "RUNNING", 1, 30.0, nodes=("n2",), started=True),
    JobStateChange("b", "FAILED", 0, 30.0, ended=(0, "FAILED")),  # never ran: nothing to end
]


def _store(path: Path) -> Store:
    store = Store(sqlite_url(str(path)))
    for job_id in ("a", "b"):
        store.register_job(job_id, "fake", now=0.0)
    return store


def test_one_write_stores_what_the_calls_one_by_one_store(tmp_path: Path) -> None:
    batched, single = _store(tmp_path / "batched.db"), _store(tmp_path / "single.db")
    batched.record_job_states(CHANGES)
    for c in CHANGES:
        if c.ended is not None:
            with contextlib.suppress(NotFound):
                single.record_attempt_end(c.job_id, c.ended[0], ended_at=c.at, end_state=c.ended[1])
        single.update_job_progress(c.job_id, state=c.state, attempt=c.attempt)
        if c.started:
            single.record_attempt_start(c.job_id, c.attempt, started_at=c.at, nodes=c.nodes)
    assert batched.list_jobs() == single.list_jobs()
    assert batched.list_attempts() == single.list_attempts()
    first, second = batched.list_attempts("a")
    assert (first.ended_at, first.end_state, first.nodes) == (20.0, "REQUEUED", ("n1",))
    assert (second.started_at, second.ended_at, second.nodes) == (30.0, None, ("n2",))
    assert batched.list_attempts("b") == []


def test_an_unknown_job_stores_nothing_of_the_poll(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    with pytest.raises(NotFound, match="unknown job 'nope'"):
        store.record_job_states([*CHANGES, JobStateChange("nope", "RUNNING", 0, 1.0)])
    assert [j.state for j in store.list_jobs()] == ["", ""]
    assert store.list_attempts() == []


def test_the_service_stores_a_polls_changes_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    sched = FakeScheduler(nodes=["n1", "n2"])
    service = Service(Config(service=ServiceConfig(state_dir=str(tmp_path))), store, sched)
    writes: list[list[JobStateChange]] = []
    record = store.record_job_states

    def recording(changes: list[JobStateChange]) -> None:
        writes.append(list(changes))
        record(changes)

    def one_by_one(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a job's state stored in a transaction of its own")

    monkeypatch.setattr(store, "record_job_states", recording)
    for name in ("record_attempt_start", "record_attempt_end", "update_job_progress"):
        monkeypatch.setattr(store, name, one_by_one)
    for i in range(4):
        service.register(f"j{i}", JobSpec())
        sched.add_job(f"j{i}", ["n1", "n2"])
    service.cycle()
    assert [[c.job_id for c in w] for w in writes] == [["j0", "j1", "j2", "j3"]]
    sched.set_state("j1", JobState.FAILED)
    sched.set_state("j3", JobState.COMPLETED)
    service.cycle()
    # The poll's changes in one write; the endings themselves follow in one write of their
    # own once no finding of theirs waits to be stored (durable_state), then nothing more.
    assert [(c.job_id, c.state, c.ended) for c in writes[1]] == [
        ("j1", None, (0, "FAILED")),
        ("j3", None, (0, "COMPLETED")),
    ]
    for _ in range(3):
        service.cycle()
    # j3 ended cleanly: stored at once. j1's failure is a finding that still settles (no
    # time passes here), so its ending waits, and no poll writes it again meanwhile.
    later = [(c.job_id, c.state, c.ended) for w in writes[2:] for c in w]
    assert later == [("j3", "COMPLETED", None)]
    assert {j.job_id: j.state for j in store.list_jobs()}["j1"] == "RUNNING"
    ended = {a.job_id: a.end_state for a in store.list_attempts()}
    assert ended == {"j0": "", "j1": "FAILED", "j2": "", "j3": "COMPLETED"}
    service.close()
