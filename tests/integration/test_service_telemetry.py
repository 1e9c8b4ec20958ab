"""GPU telemetry wired into the service: real HTTP endpoints (the project's DCGM-exporter stub),
the real service loop and SQLite store, the in-memory scheduler.

An Xid in a node's telemetry is system-source evidence, as the kernel log is; an endpoint
that is dead or slow makes that node's telemetry "unknown", raises no incident, and never
holds up the loop (scrapes run in a thread of their own).
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trainmedic.core.detect import SMALL_JOB
from trainmedic.core.model import Category, EvidenceSource, Kind
from trainmedic.core.observations import SourceRecovered, SourceStale, TelemetrySample
from trainmedic.lab.dcgm_stub import DcgmExporterStub
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig, TelemetryConfig
from trainmedic.service.loop import Service
from trainmedic.sources.dcgm import TelemetryPoller
from trainmedic.store import IncidentRecord, JobSpec, Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def dead_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"


class SlowExporter:
    """Answers every request after ``delay_s``: a wedged exporter on a busy node."""

    def __init__(self, delay_s: float) -> None:
        delay = delay_s

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                time.sleep(delay)
                try:
                    self.send_response(200)
                    self.end_headers()
                except OSError:
                    return  # the scraper gave up long ago: that is the point

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclasses.dataclass
class Rig:
    service: Service
    store: Store
    stub: DcgmExporterStub
    log: Path

    def run_for(self, seconds: float) -> float:
        """Cycle the service every 0.1 s; the slowest cycle's duration."""
        slowest = 0.0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            self.service.cycle()
            slowest = max(slowest, time.monotonic() - started)
            with self.log.open("a") as out:
                out.write("step 1 loss 1.0\n")  # keep the job visibly alive
            time.sleep(0.1)
        return slowest

    def incidents(self) -> list[IncidentRecord]:
        return [i for i in self.store.list_incidents("9") if i.kind is not Kind.STRAGGLER]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    slow = SlowExporter(delay_s=5.0)
    stub = DcgmExporterStub("node1", gpus=2).start()
    telemetry = TelemetryConfig(
        dcgm_urls={"node1": stub.url, "node2": dead_url(), "node3": slow.url},
        scrape_interval_s=0.3,
        timeout_s=1.0,
    )
    config = Config(
        service=ServiceConfig(state_dir=str(tmp_path)), detect=SMALL_JOB, telemetry=telemetry
    )
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    sched = FakeScheduler()
    sched.add_job("9", ["node1", "node2", "node3"])
    service = Service(config, store, sched, executor_id="t")
    log = tmp_path / "job.out"
    log.write_text("")
    service.register("9", JobSpec(log_paths=(str(log),)))
    try:
        yield Rig(service, store, stub, log)
    finally:
        service.close()
        stub.stop()
        slow.stop()
        store.close()


def test_xid_in_telemetry_is_gpu_hardware_evidence_and_dead_endpoints_are_unknown(
    rig: Rig,
) -> None:
    slowest = rig.run_for(2.5)  # baseline scrapes; the slow endpoint times out meanwhile
    assert slowest < 0.8, f"a cycle waited for a scrape ({slowest:.2f} s)"
    status = {s.source: s for s in rig.service.sources.of_job("9")}
    assert status["dcgm:node1"].status == "up"
    assert status["dcgm:node2"].status == "unknown" and "refused" in status["dcgm:node2"].detail
    assert status["dcgm:node3"].status == "unknown" and "timed out" in status["dcgm:node3"].detail
    assert rig.incidents() == [], "an endpoint that does not answer is no failure"

    rig.stub.set_xid(1, 79)
    deadline = time.monotonic() + 15
    while not rig.incidents() and time.monotonic() < deadline:
        rig.run_for(0.3)
    (incident,) = rig.incidents()
    assert (incident.kind, incident.category) == (Kind.CRASH, Category.GPU_HARDWARE)
    assert incident.implicated.nodes == ("node1",)
    root = incident.root_cause
    assert root is not None and root.signature == "dcgm.xid" and root.xid == 79
    assert root.evidence is EvidenceSource.GPU_TELEMETRY and root.gpu == "1"


def test_an_endpoint_that_answers_again_is_reported_up() -> None:
    stub = DcgmExporterStub("node5", gpus=1)  # listening, not answering yet
    poller = TelemetryPoller(lambda node: stub.url, timeout_s=0.5)
    poller.set_nodes(["node5"])
    try:
        poller.scrape_once()
        (stale,) = poller.drain()
        assert isinstance(stale, SourceStale) and stale.source == "dcgm:node5"
        stub.start()
        poller.scrape_once()
        found = poller.drain()
        assert any(isinstance(o, TelemetrySample) for o in found)
        (back,) = [o for o in found if isinstance(o, SourceRecovered)]
        assert back.source == "dcgm:node5" and back.node == "node5"
        poller.scrape_once()
        assert not any(isinstance(o, SourceRecovered) for o in poller.drain()), "once"
    finally:
        poller.stop()
        stub.stop()
