"""Metrics computed at scrape time from a real SQLite store, a fresh registry per test."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from trainmedic.api.metrics import job_goodput, make_registry
from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.store import AdviceMode, AdviceStatus, Store, sqlite_url
from trainmedic.store.facts import load_job_facts

CRASH = Verdict(failure=True, kind=Kind.CRASH, category=Category.GPU_HARDWARE, confidence=0.9)
HANG = Verdict(failure=True, kind=Kind.HANG, category=Category.UNKNOWN, confidence=0.5)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(sqlite_url(str(tmp_path / "tm.db")))


def sample(store: Store, name: str, labels: dict[str, str] | None = None) -> float | None:
    return make_registry(store, now=lambda: 100.0).get_sample_value(name, labels or {})


def test_empty_store_scrapes(store: Store) -> None:
    text = generate_latest(make_registry(store, now=lambda: 0.0)).decode()
    assert "# TYPE trainmedic_detection_latency_seconds histogram" in text
    assert sample(store, "trainmedic_restarts_total") == 0.0
    assert sample(store, "trainmedic_detection_latency_seconds_count", {"kind": "crash"}) is None


def test_latencies_counts_and_goodput(store: Store) -> None:
    store.register_job("j1", "local", now=0.0)
    store.record_attempt_start("j1", 0, started_at=0.0)
    store.update_job_progress("j1", progress_at=10.0, iteration=1)
    store.update_job_progress("j1", progress_at=60.0, iteration=500)
    crash = store.add_incident("j1", 0, CRASH, detected_at=61.5, fault_time=60.0)
    store.add_incident("j1", 0, HANG, detected_at=70.0)  # fault time unknown
    restart = Advice(Action.RESTART_EXCLUDING, "x")
    adv = store.put_advice("j1", 0, restart, mode=AdviceMode.ACTION, now=62.0, incident_id=crash)
    assert store.claim_advice(adv.id, "exec")
    store.mark_applied(adv.id, now=62.0)
    store.set_advice_status(adv.id, AdviceStatus.CONVERGED, now=70.0)
    store.put_advice("j1", 0, Advice(Action.STOP, "y"), mode=AdviceMode.MONITOR, now=71.0)
    store.record_node_event("node2", time=62.0, drained=True, reason="trainmedic: xid79")

    crash_labels = {"kind": "crash"}
    assert sample(store, "trainmedic_detection_latency_seconds_sum", crash_labels) == 1.5
    assert sample(store, "trainmedic_detection_latency_seconds_count", crash_labels) == 1.0
    bucket = {"kind": "crash", "le": "1.0"}
    assert sample(store, "trainmedic_detection_latency_seconds_bucket", bucket) == 0.0
    # Not measured is not zero: the hang is counted apart, outside the histogram.
    assert sample(store, "trainmedic_detection_latency_seconds_count", {"kind": "hang"}) == 0.0
    assert sample(store, "trainmedic_detection_latency_unmeasured_total", {"kind": "hang"}) == 1
    assert sample(store, "trainmedic_action_latency_seconds_sum") == 0.5
    assert sample(store, "trainmedic_recovery_latency_seconds_sum") == 8.5
    cause = {"category": "gpu_hardware", "kind": "crash"}
    assert sample(store, "trainmedic_incidents_total", cause) == 1.0
    assert sample(store, "trainmedic_restarts_total") == 1.0
    assert sample(store, "trainmedic_stops_total") == 0.0  # monitor mode: only recorded
    assert sample(store, "trainmedic_drains_total") == 1.0
    recorded = {"status": "recorded", "action": "stop"}
    assert sample(store, "trainmedic_advice", recorded) == 1.0
    # 50 s of progress (10 -> 60) over 100 s since registration.
    assert sample(store, "trainmedic_job_goodput_ratio", {"job_id": "j1"}) == 0.5


def test_goodput_of_a_finished_job_stops_at_its_end(store: Store) -> None:
    store.register_job("j1", "local", now=0.0)
    store.record_attempt_start("j1", 0, started_at=0.0)
    store.update_job_progress("j1", progress_at=5.0, iteration=1)
    store.update_job_progress("j1", progress_at=15.0, iteration=9)
    store.record_attempt_end("j1", 0, ended_at=20.0, end_state="FAILED")
    store.record_attempt_start("j1", 1, started_at=25.0)
    store.update_job_progress("j1", progress_at=30.0, iteration=8)
    store.update_job_progress("j1", progress_at=40.0, iteration=20, state="COMPLETED")
    store.record_attempt_end("j1", 1, ended_at=40.0, end_state="COMPLETED")
    (facts,) = load_job_facts(store, "j1")
    # 20 s of progress over 40 s, less the work attempt 0 did past the point attempt 1
    # resumed from (iteration 7: 2 steps x 1.25 s).
    assert job_goodput(facts, now=1000.0) == pytest.approx((20.0 - 2.5) / 40.0)
    assert job_goodput(facts, now=40.0) == job_goodput(facts, now=1000.0)
