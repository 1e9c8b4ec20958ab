"""Store: a cycle's progress of many jobs in one transaction (``record_progress``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.store import NotFound, ProgressWrite, Store, sqlite_url


def _store(path: Path) -> Store:
    store = Store(sqlite_url(str(path)))
    for job_id in ("a", "b"):
        store.register_job(job_id, "local", now=0.0)
    store.record_attempt_start("a", 0, started_at=1.0, nodes=["n1"])
    store.record_attempt_start("a", 1, started_at=50.0, nodes=["n2"])
    store.record_attempt_start("b", 0, started_at=1.0, nodes=["n3"])
    return store


WRITES = [
    ProgressWrite("a", checkpoint_iteration=40, checkpoint_at=45.0),
    ProgressWrite("a", progress_at=55.0, iteration=41),  # the new attempt's first step
    ProgressWrite("a", progress_at=60.0, iteration=48),  # and its latest
    ProgressWrite("b", progress_at=7.0, iteration=3),
    ProgressWrite("b", progress_at=9.0, iteration=5),
]


def test_one_batch_stores_what_the_calls_one_by_one_store(tmp_path: Path) -> None:
    batched, single = _store(tmp_path / "batched.db"), _store(tmp_path / "single.db")
    batched.record_progress(WRITES)
    for w in WRITES:
        single.update_job_progress(
            w.job_id,
            progress_at=w.progress_at,
            iteration=w.iteration,
            checkpoint_iteration=w.checkpoint_iteration,
            checkpoint_at=w.checkpoint_at,
        )
    assert batched.list_jobs() == single.list_jobs()
    assert batched.list_attempts() == single.list_attempts()
    a = batched.get_job("a")
    assert a is not None and (a.last_iteration, a.last_progress_at) == (48, 60.0)
    assert (a.last_checkpoint_iteration, a.last_checkpoint_at) == (40, 45.0)
    old, new = batched.list_attempts("a")
    assert old.first_iteration is None  # only the current attempt gets the steps
    # Per job in the order given: the first step stays the attempt's first, the last its last.
    assert (new.first_iteration, new.first_progress_at) == (41, 55.0)
    assert (new.last_iteration, new.last_progress_at) == (48, 60.0)


def test_a_later_batch_keeps_the_attempts_first_step(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    store.record_progress([ProgressWrite("b", progress_at=7.0, iteration=3)])
    store.record_progress([ProgressWrite("b", progress_at=8.0, iteration=4)])
    (attempt,) = store.list_attempts("b")
    assert (attempt.first_iteration, attempt.last_iteration) == (3, 4)


def test_an_unknown_job_stores_nothing_of_the_batch(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    with pytest.raises(NotFound, match="unknown job 'nope'"):
        store.record_progress([*WRITES, ProgressWrite("nope", progress_at=1.0, iteration=1)])
    assert all(job.last_iteration is None for job in store.list_jobs())
    store.record_progress([])  # nothing to write: no transaction, no error


def test_more_jobs_than_sqlite_binds_in_one_batch(tmp_path: Path) -> None:
    store = Store(sqlite_url(str(tmp_path / "s.db")))
    ids = [f"j{i}" for i in range(1200)]
    for job_id in ids:
        store.register_job(job_id, "local", now=0.0)
    store.record_progress(
        [ProgressWrite(j, progress_at=2.0, iteration=i) for i, j in enumerate(ids)]
    )
    assert [j.last_iteration for j in store.list_jobs()] == list(range(1200))
