"""The drain circuit breaker's state in the store, on SQLite and on a real PostgreSQL server:
a trip survives a new process (a new Store on the same database), stays until reset, and the
drains it counts are the advised ones since the last reset."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trainmedic.core.model import Action, Advice
from trainmedic.store import AdviceMode, Store, sqlite_url

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(str(tmp_path / "state.db"))
    else:
        yield request.getfixturevalue("postgres_url")


def test_a_trip_outlives_the_process_until_an_operator_resets_it(url: str) -> None:
    first = Store(url)
    first.reset_breaker(now=0.0, by="setup")  # the PostgreSQL database is shared per module
    for job, nodes in (("b-1", ("n1",)), ("b-2", ("n2", "n1")), ("b-3", ())):
        advice = Advice(Action.RESTART_EXCLUDING, "xid", nodes, nodes)
        first.put_advice(job, 0, advice, mode=AdviceMode.MONITOR, now=100.0)
    assert first.advised_drains(since=50.0) == 2  # distinct nodes, every mode
    assert first.advised_drains(since=150.0) == 0
    tripped = first.trip_breaker(now=120.0, reason="incident 3 of job b-2 would drain past 25%")
    assert tripped.tripped and tripped.tripped_at == 120.0
    again = first.trip_breaker(now=130.0, reason="later")
    assert (again.tripped_at, again.reason) == (120.0, tripped.reason), "the first trip stands"
    first.close()

    restarted = Store(url)
    assert restarted.breaker_state().tripped
    was, state = restarted.reset_breaker(now=140.0, by="ops")
    assert was and not state.tripped and (state.reset_at, state.reset_by) == (140.0, "ops")
    assert restarted.reset_breaker(now=150.0, by="ops") == (False, state)
    restarted.close()
