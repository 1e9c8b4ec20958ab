"""Store: an incident and its advice are written together or not at all (real SQLite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trainmedic.core.errors import StoreError
from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.store import AdviceMode, AdviceStatus, Store, sqlite_url

HANG = Verdict(True, Kind.HANG, Category.UNKNOWN, 0.4)
RESTART = Advice(Action.RESTART, "hang")


def _store(tmp_path: Path) -> Store:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    store.register_job("7", "fake", now=0.0)
    return store


def test_a_decision_is_stored_once_and_re_derived_unchanged(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = store.record_decision(
        "7", 0, HANG, RESTART, mode=AdviceMode.ACTION, now=2.0, detected_at=1.0
    )
    assert first.new and first.advice.status is AdviceStatus.PENDING
    assert first.advice.incident_id == first.incident_id
    # The restarted service reaches the same verdict; its (maybe different) advice is not
    # stored over the first.
    again = store.record_decision(
        "7", 0, HANG, Advice(Action.STOP, "x"), mode=AdviceMode.ACTION, now=9.0, detected_at=8.0
    )
    assert (again.new, again.incident_id, again.advice) == (False, first.incident_id, first.advice)
    assert len(store.list_incidents("7")) == 1 and len(store.list_advice("7")) == 1


def test_an_incident_left_without_advice_gets_it_on_the_next_decision(tmp_path: Path) -> None:
    store = _store(tmp_path)
    orphan = store.add_incident("7", 0, HANG, detected_at=1.0)  # as an older version left it
    decided = store.record_decision(
        "7", 0, HANG, RESTART, mode=AdviceMode.MONITOR, now=2.0, detected_at=1.0
    )
    assert (decided.new, decided.incident_id) == (True, orphan)
    assert decided.advice.status is AdviceStatus.RECORDED


def test_a_failed_advice_write_leaves_no_incident_behind(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with sqlite3.connect(tmp_path / "state.db") as db:  # the disk refuses the second write
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON advice BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
    with pytest.raises(StoreError):
        store.record_decision(
            "7", 0, HANG, RESTART, mode=AdviceMode.ACTION, now=2.0, detected_at=1.0
        )
    assert store.list_incidents("7") == []
