"""Store: jobs and attempts on a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trainmedic.core.errors import StoreError
from trainmedic.store import JobSpec, JobStateChange, NotFound, Store, sqlite_url


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(sqlite_url(str(tmp_path / "state" / "tm.db")))


def test_register_is_an_upsert_that_keeps_registration_time(store: Store) -> None:
    spec = JobSpec(log_paths=("/x/a.log",), kernel_logs={"node1": "/k/1"}, nodes=("node1",))
    first = store.register_job("j1", "local", now=100.0, name="train", spec=spec)
    assert first.registered_at == 100.0
    assert first.spec == spec
    assert first.state == "" and first.attempt == 0
    again = store.register_job("j1", "slurm", now=200.0, spec=JobSpec(checkpoint_dir="/ck"))
    assert again.registered_at == 100.0
    assert again.scheduler == "slurm"
    assert again.spec.checkpoint_dir == "/ck"
    assert [j.job_id for j in store.list_jobs()] == ["j1"]


def test_register_says_whether_it_created_the_job(store: Store) -> None:
    """The service asks a job new to the store for no attempts (it has none)."""
    first, created = store.register_job_created("j1", "local", now=100.0)
    assert created and first.registered_at == 100.0
    again, created = store.register_job_created("j1", "local", now=200.0, name="renamed")
    assert not created
    assert again.registered_at == 100.0 and again.name == "renamed"


def test_live_jobs_leave_out_the_ended_ones_not_watched(store: Store) -> None:
    """What the service reads each cycle: not every job the table ever held."""
    for job_id, now in (("new", 1.0), ("running", 2.0), ("done", 3.0), ("done-watched", 4.0)):
        store.register_job(job_id, "local", now=now)
    store.record_job_states(
        [
            JobStateChange("running", "RUNNING", 0, 5.0),
            JobStateChange("done", "COMPLETED", 0, 5.0),
            JobStateChange("done-watched", "FAILED", 0, 5.0),
        ]
    )
    live = store.list_live_jobs(["done-watched", "running", "not-stored"])
    assert [j.job_id for j in live] == ["new", "running", "done-watched"]
    assert live == [j for j in store.list_jobs() if j.job_id != "done"]


def test_wal_mode_is_on(tmp_path: Path) -> None:
    db = tmp_path / "tm.db"
    Store(sqlite_url(str(db)))
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_progress_updates_job_and_current_attempt(store: Store) -> None:
    store.register_job("j1", "local", now=0.0)
    store.record_attempt_start("j1", 0, started_at=1.0, nodes=["node1", "node2"])
    store.update_job_progress("j1", state="RUNNING", progress_at=5.0, iteration=10)
    store.update_job_progress("j1", progress_at=9.0, iteration=50, checkpoint_iteration=40)
    job = store.get_job("j1")
    assert job is not None
    assert (job.state, job.last_iteration, job.last_progress_at) == ("RUNNING", 50, 9.0)
    assert job.last_checkpoint_iteration == 40
    (attempt,) = store.list_attempts("j1")
    assert (attempt.first_iteration, attempt.first_progress_at) == (10, 5.0)
    assert (attempt.last_iteration, attempt.last_progress_at) == (50, 9.0)
    assert attempt.nodes == ("node1", "node2")


def test_attempts_are_idempotent_and_advance_the_job(store: Store) -> None:
    store.register_job("j1", "local", now=0.0)
    store.record_attempt_start("j1", 0, started_at=1.0, nodes=["n1"])
    store.record_attempt_end("j1", 0, ended_at=20.0, end_state="FAILED")
    store.record_attempt_end("j1", 0, ended_at=99.0, end_state="CANCELLED")  # first end wins
    store.record_attempt_start("j1", 1, started_at=25.0, nodes=["n2"])
    again = store.record_attempt_start("j1", 1, started_at=30.0, nodes=["n3"])
    assert again.started_at == 25.0 and again.nodes == ("n2",)
    first, second = store.list_attempts("j1")
    assert (first.ended_at, first.end_state) == (20.0, "FAILED")
    assert second.ended_at is None
    job = store.get_job("j1")
    assert job is not None and job.attempt == 1


def test_unknown_job_is_a_store_error(store: Store) -> None:
    with pytest.raises(NotFound, match="unknown job 'nope'"):
        store.update_job_progress("nope", state="RUNNING")
    with pytest.raises(StoreError):
        store.record_attempt_start("nope", 0, started_at=0.0)
    assert store.get_job("nope") is None


def test_unusable_url_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        Store("nosuchdialect://x")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError):
        Store(sqlite_url(str(blocker / "sub" / "tm.db")))
    # Nothing listens on port 1: a clear StoreError naming the URL, password hidden.
    with pytest.raises(StoreError, match=r"postgresql\+psycopg://u:\*\*\*@127.0.0.1:1/db") as info:
        Store("postgresql://u:secret@127.0.0.1:1/db")
    assert "\n" not in str(info.value) and "secret" not in str(info.value)
