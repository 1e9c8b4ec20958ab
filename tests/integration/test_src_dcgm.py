"""DcgmScraper against a real local HTTP server serving dcgm-exporter's exposition format."""

from __future__ import annotations

import socket
import time

import pytest

from trainmedic.core.model import ActionHint, Category, EvidenceSource
from trainmedic.core.observations import SourceStale, TelemetrySample
from trainmedic.core.telemetry import (
    DBE_VOLATILE,
    GPU_TEMP,
    XID,
    TelemetryKey,
    remember,
    telemetry_to_events,
)
from trainmedic.lab.dcgm_stub import DcgmExporterStub
from trainmedic.sources.dcgm import DcgmScraper

pytestmark = pytest.mark.slow


def samples(observations: list[object]) -> list[TelemetrySample]:
    out = [o for o in observations if isinstance(o, TelemetrySample)]
    assert len(out) == len(observations), observations
    return out


def test_scrape_real_endpoint_and_turn_an_xid_into_an_event() -> None:
    with DcgmExporterStub("node2", gpus=2) as stub:
        text = stub.exposition()
        assert "# TYPE DCGM_FI_DEV_XID_ERRORS gauge" in text and 'modelName="NVIDIA H100' in text
        scraper = DcgmScraper("node2", stub.url)
        first = samples(scraper.poll())
        temps = {s.gpu: s.value for s in first if s.metric == GPU_TEMP}
        assert temps == {"0": 34.0, "1": 35.0}
        previous: dict[TelemetryKey, float] = remember({}, first)
        assert telemetry_to_events(first, {}) == [], "first sight is a baseline"

        stub.set_xid(1, 79)
        stub.add_dbe(0, 2)
        second = samples(scraper.poll())
        events = telemetry_to_events(second, previous)
        by_sig = {e.signature: e for e in events}
        xid = by_sig["dcgm.xid"]
        assert (xid.xid, xid.node, xid.gpu, xid.strong) == (79, "node2", "1", True)
        assert xid.evidence is EvidenceSource.GPU_TELEMETRY and xid.evidence.is_system()
        assert xid.category is Category.GPU_HARDWARE and xid.action_hint is ActionHint.REBOOT_NODE
        dbe = by_sig["dcgm.ecc_dbe"]
        assert dbe.gpu == "0" and dbe.strong
        assert sorted(e.signature for e in events) == ["dcgm.ecc_dbe", "dcgm.ecc_dbe", "dcgm.xid"]

        previous = remember(previous, second)
        assert telemetry_to_events(samples(scraper.poll()), previous) == [], "no change, no news"
        assert stub.requests == 3


def test_unreachable_endpoint_is_stale_once_and_never_raises() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    scraper = DcgmScraper("node3", f"http://127.0.0.1:{port}/metrics", timeout_s=1.0)
    started = time.monotonic()
    (stale,) = scraper.poll()
    assert isinstance(stale, SourceStale) and stale.node == "node3" and scraper.stale
    assert scraper.poll() == []
    assert time.monotonic() - started < 3.0


def test_endpoint_that_comes_back_recovers() -> None:
    stub = DcgmExporterStub("node4", gpus=1)
    scraper = DcgmScraper("node4", stub.url.replace("/metrics", "/wrong"))
    stub.start()
    try:
        (stale,) = scraper.poll()
        assert isinstance(stale, SourceStale) and "404" in stale.detail
        scraper.url = stub.url
        got = samples(scraper.poll())
        assert not scraper.stale and {s.metric for s in got} >= {XID, DBE_VOLATILE, GPU_TEMP}
    finally:
        stub.stop()
