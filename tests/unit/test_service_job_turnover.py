"""The service's cost per job that comes and goes (the soak benchmark's 1,000 jobs): a job
new to the store is watched without asking the store for its history, a known one is
resumed from it (real SQLite, the in-memory scheduler)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, JobStateChange, Store, sqlite_url


def _service(tmp_path: Path) -> tuple[Service, Store]:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    config = Config(service=ServiceConfig(state_dir=str(tmp_path)))
    return Service(config, store, FakeScheduler(nodes=["n1"])), store


def test_a_job_new_to_the_store_is_watched_without_reading_its_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, store = _service(tmp_path)
    asked: list[str] = []
    monkeypatch.setattr(store, "list_attempts", lambda job_id=None: asked.append("attempts"))
    monkeypatch.setattr(store, "list_incidents", lambda job_id=None: asked.append("incidents"))
    service.register("j1", JobSpec(log_paths=(str(tmp_path / "j1.log"),)))
    assert "j1" in service.engine.jobs
    assert asked == []


def test_a_job_the_store_knows_is_resumed_at_its_stored_attempt(tmp_path: Path) -> None:
    service, store = _service(tmp_path)
    # Registered and run before this service met it (another process, an earlier run).
    store.register_job("j1", "fake", now=1.0)
    store.record_attempt_start("j1", 2, started_at=5.0, nodes=["n1"])
    assert "j1" not in service.engine.jobs
    service.register("j1", JobSpec(log_paths=(str(tmp_path / "j1.log"),)))
    track = service.engine._jobs["j1"]
    assert track.attempt_started == 5.0


def test_a_cycle_does_not_read_the_jobs_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jobs table keeps every job ever watched: a cycle reads the live ones only, so its
    cost does not grow with the jobs that came and went."""
    service, store = _service(tmp_path)
    for i in range(50):
        store.register_job(f"old{i}", "fake", now=1.0)
        store.record_job_states([JobStateChange(f"old{i}", "COMPLETED", 0, 2.0)])
    service, store = _service(tmp_path)  # a restart: the ended jobs are let go
    service.register("j1", JobSpec(log_paths=(str(tmp_path / "j1.log"),)))
    monkeypatch.setattr(store, "list_jobs", lambda: pytest.fail("the whole table read"))
    service.cycle()
    assert set(service.engine.jobs) == {"j1"}
