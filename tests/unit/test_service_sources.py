"""The service marks a source it cannot read "unknown" for the job, shows it in the API
(``GET /jobs/{id}``, ``trainmedic_source_up``) and calls no hang on it (real files, a real
SQLite store, the in-memory scheduler, a clock the test moves)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from trainmedic.api.app import create_app
from trainmedic.core.detect import SMALL_JOB
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url


class Clock:
    """Real time plus an offset the test advances (the fake scheduler stamps real time)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@dataclasses.dataclass
class Rig:
    service: Service
    sched: FakeScheduler
    store: Store
    clock: Clock
    log: Path
    api: TestClient

    def sources(self) -> dict[str, tuple[str, str]]:
        body = self.api.get("/jobs/7").json()
        return {s["source"]: (s["status"], s["detail"]) for s in body["sources"]}

    def report(self, first: int, count: int) -> None:
        with self.log.open("a") as out:
            for i in range(first, first + count):
                out.write(f"step {i} loss 1.25\n")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    config = Config(
        service=ServiceConfig(mode="action", state_dir=str(tmp_path), api_read_token="r"),
        detect=SMALL_JOB,
    )
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    clock = Clock()
    service = Service(config, store, sched, executor_id="t", clock=clock)
    log = tmp_path / "job.out"
    service.register("7", JobSpec(log_paths=(str(log),)))
    api = TestClient(
        create_app(store, config, now=clock, sources=service.sources),
        headers={"Authorization": "Bearer r"},  # reads need the read token
    )
    yield Rig(service, sched, store, clock, log, api)
    service.close()
    store.close()


def test_a_log_that_does_not_exist_is_unknown_and_no_hang(rig: Rig) -> None:
    rig.service.cycle()
    status, detail = rig.sources()[f"log:{rig.log}"]
    assert status == "unknown" and "No such file" in detail
    assert rig.sources()["scheduler"] == ("up", "")
    rig.clock.offset += SMALL_JOB.startup_grace_s + 60.0  # past the start-up grace
    rig.service.cycle()
    rig.service.cycle()
    assert rig.store.list_incidents("7") == [], "an unreadable log is not a hang"
    metrics = rig.api.get("/metrics").text
    assert f'trainmedic_source_up{{job_id="7",source="log:{rig.log}"}} 0.0' in metrics
    rig.report(1, 3)  # the log appears
    rig.service.cycle()
    assert rig.sources()[f"log:{rig.log}"] == ("up", "")
    metrics = rig.api.get("/metrics").text
    assert f'trainmedic_source_up{{job_id="7",source="log:{rig.log}"}} 1.0' in metrics


def test_a_failed_scheduler_poll_is_unknown_and_no_hang(rig: Rig) -> None:
    rig.report(1, 30)
    rig.service.cycle()
    rig.sched.stale = True
    rig.service.cycle()
    assert rig.sources()["scheduler"] == ("unknown", "fake: unreachable")
    rig.clock.offset += 600.0  # silence far past the 5 s threshold, scheduler still unknown
    rig.service.cycle()
    time.sleep(0.6)  # past the engine's settle time
    rig.service.cycle()
    assert rig.store.list_incidents("7") == []
    assert rig.sched.calls == [], "nothing done to a job whose state is unknown"
    rig.sched.stale = False
    rig.service.cycle()
    assert rig.sources()["scheduler"] == ("up", "")
    # Back: silence counts again from now, and a real hang is still found.
    rig.clock.offset += SMALL_JOB.hang_floor_s + 1.0
    rig.service.cycle()
    time.sleep(0.6)
    rig.service.cycle()
    (incident,) = rig.store.list_incidents("7")
    assert incident.kind.value == "hang"
