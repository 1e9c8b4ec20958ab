"""The service stores a cycle's progress of all its jobs in one transaction, and a write the
store refused is made again next cycle (real SQLite, real log files, the in-memory
scheduler)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from trainmedic.core.errors import StoreError
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, ProgressWrite, Store, sqlite_url


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
