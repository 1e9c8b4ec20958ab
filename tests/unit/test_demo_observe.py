"""What the demo reads to time a fault (demo/observe.py): the trainer's faults.log and a wait
that ends the demo with a clear error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainmedic.demo.observe import DemoError, DemoObserver
from trainmedic.demo.report import Timeline
from trainmedic.store import Store, sqlite_url


@pytest.fixture
def observer(tmp_path: Path) -> Iterator[DemoObserver]:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    said: list[str] = []
    yield DemoObserver(store, Timeline(said.append), tmp_path, 1.0, [])
    store.close()


def test_fired_at_is_the_earliest_rank_of_that_fault_and_attempt(
    observer: DemoObserver, tmp_path: Path
) -> None:
    assert observer.fired_at("f1", 0) is None  # no faults.log yet
    records = [
        {"id": "f1", "attempt": 0, "time": 12.5, "rank": 1},
        {"id": "f1", "attempt": 0, "time": 12.0, "rank": 0},
        {"id": "f1", "attempt": 1, "time": 40.0, "rank": 0},
        {"id": "f2", "attempt": 0, "time": 5.0, "rank": 0},
    ]
    lines = [json.dumps(r) for r in records] + ['{"id": "f1", "att']  # a line being written
    (tmp_path / "faults.log").write_text("\n".join(lines))
    assert observer.fired_at("f1", 0) == 12.0
    assert observer.fired_at("f1", 1) == 40.0
    assert observer.fired_at("f1", 2) is None


def test_wait_returns_the_first_true_value_or_raises_a_demo_error(observer: DemoObserver) -> None:
    values = iter([0, None, "ready"])
    assert observer.wait("it", lambda: next(values), 5.0) == "ready"
    with pytest.raises(DemoError, match="timed out after 0 s waiting for nothing"):
        observer.wait("nothing", lambda: None, 0.2)
    assert observer.iteration("unknown-job") == 0
