"""The service stores a cycle's progress of all its jobs in one transaction, and a write the
store refused is made again next cycle (real SQLite, real log files, the in-memory
scheduler)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from trainmedic.core.errors import StoreError
from trainmedic.core.observations import Progress
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import AdviceRecord, JobSpec, ProgressWrite, Store, sqlite_url


def _service(tmp_path: Path, jobs: int) -> tuple[Service, Store, list[Path]]:
    config = Config(service=ServiceConfig(state_dir=str(tmp_path)))
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    sched = FakeScheduler(nodes=["n1"])
    service = Service(config, store, sched)
    logs = []
    for i in range(jobs):
        log = tmp_path / f"j{i}.log"
        log.write_text("")
        service.register(f"j{i}", JobSpec(log_paths=(str(log),)))
        sched.add_job(f"j{i}", ["n1"])
        logs.append(log)
    service.cycle()
    return service, store, logs


def _steps(logs: list[Path], first: int, last: int) -> None:
    for log in logs:
        with log.open("a") as f:
            f.writelines(f"[rank0] iter={i} loss=0.5 step_s=0.01\n" for i in range(first, last))


def test_a_cycles_progress_is_one_write_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, store, logs = _service(tmp_path, 5)
    batches: list[list[ProgressWrite]] = []
    record = store.record_progress

    def recording(writes: Sequence[ProgressWrite]) -> None:
        batches.append(list(writes))
        record(writes)

    def one_by_one(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a job's progress written in a transaction of its own")

    monkeypatch.setattr(store, "record_progress", recording)
    monkeypatch.setattr(store, "update_job_progress", one_by_one)
    _steps(logs, 1, 4)
    service.cycle()
    (batch,) = [b for b in batches if b]
    # Each job's new attempt: its first step, then its latest, next to each other.
    assert [(w.job_id, w.iteration) for w in batch] == [
        (f"j{i}", n) for i in range(5) for n in (1, 3)
    ]
    _steps(logs, 4, 6)
    service.cycle()
    assert [(w.job_id, w.iteration) for w in batches[-1]] == [(f"j{i}", 5) for i in range(5)]
    assert [j.last_iteration for j in store.list_jobs()] == [5] * 5
    service.close()


def test_a_refused_progress_write_is_made_next_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, store, logs = _service(tmp_path, 2)
    record = store.record_progress
    refusals = [StoreError("database is locked")]

    def refusing(writes: Sequence[ProgressWrite]) -> None:
        if writes and refusals:
            raise refusals.pop()
        record(writes)

    monkeypatch.setattr(store, "record_progress", refusing)
    _steps(logs, 1, 3)
    with pytest.raises(StoreError):
        service.cycle()
    assert [j.last_iteration for j in store.list_jobs()] == [None, None]
    service.cycle()  # no new line: what was refused is written now
    assert [j.last_iteration for j in store.list_jobs()] == [2, 2]
    attempts = store.list_attempts()
    assert [(a.first_iteration, a.last_iteration) for a in attempts] == [(1, 2), (1, 2)]
    service.close()


def test_retiring_jobs_costs_each_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ended jobs are drained before they are let go (what their logs still held is read),
    advice in progress is asked for once a cycle, not once per job, and each drained job's
    progress is looked at alone: retiring k of n jobs costs k, not k x n."""
    service, store, logs = _service(tmp_path, 6)
    _steps(logs, 1, 3)
    service.cycle()
    sched = service.adapter
    assert isinstance(sched, FakeScheduler)
    for i in range(3):
        sched.set_state(f"j{i}", JobState.COMPLETED)
    service.cycle()  # seen ended: let go once unwatch_after_s has passed
    _steps(logs[:3], 3, 9)  # their last lines, written after the service last read them
    drained = [service._jobs[f"j{i}"].logs for i in range(3)]
    advice_queries = progress_looks = 0
    active_advice, progress_of = store.active_advice, service.engine.progress_of

    def counting_advice(job_id: str | None = None) -> list[AdviceRecord]:
        nonlocal advice_queries
        advice_queries += 1
        return active_advice(job_id)

    def counting_progress(job_id: str) -> tuple[Progress | None, Progress | None]:
        nonlocal progress_looks
        progress_looks += 1
        return progress_of(job_id)

    monkeypatch.setattr(store, "active_advice", counting_advice)
    monkeypatch.setattr(service.engine, "progress_of", counting_progress)
    service._ended_since = dict.fromkeys(service._ended_since, 0.0)  # ended long ago
    service._retire_ended(sched.poll(tuple(service._jobs)), service.clock())
    assert sorted(service._jobs) == ["j3", "j4", "j5"]
    assert [source.lines_read for source in drained] == [8, 8, 8]
    assert advice_queries == 1
    assert progress_looks == 3  # one drain poll with lines each, none for the watched jobs
    service.close()
