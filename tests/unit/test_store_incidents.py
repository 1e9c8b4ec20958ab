"""Store: incidents (idempotent insert, full round trip), holds and node history."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.model import (
    Category,
    Event,
    EvidenceSource,
    Implicated,
    Kind,
    Role,
    Verdict,
)
from trainmedic.store import NotFound, Store, sqlite_url

XID = Event(
    signature="xid79",
    category=Category.GPU_HARDWARE,
    kind=Kind.CRASH,
    role=Role.PRIMARY,
    line=12,
    text="NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus",
    source="/k/node2.log",
    evidence=EvidenceSource.KERNEL_LOG,
    timestamp=1000.5,
    node="node2",
    xid=79,
    strong=True,
)
TIMEOUT = Event(
    signature="nccl_timeout",
    category=Category.UNKNOWN,
    kind=Kind.HANG,
    role=Role.CASCADE,
    line=40,
    text="Watchdog caught collective operation timeout",
    rank=0,
)
VERDICT = Verdict(
    failure=True,
    kind=Kind.CRASH,
    category=Category.GPU_HARDWARE,
    confidence=0.95,
    root_cause=XID,
    implicated=Implicated(nodes=("node2",), ranks=(2, 3), gpus=("0",)),
    cascades=(TIMEOUT,),
    basis="xid79 in kernel log of node2",
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(sqlite_url(str(tmp_path / "tm.db")))


def test_incident_round_trip(store: Store) -> None:
    incident_id = store.add_incident(
        "j1", 0, VERDICT, detected_at=1001.0, fault_time=1000.5, evidence=(XID, TIMEOUT)
    )
    got = store.get_incident(incident_id)
    assert got.root_cause == XID
    assert got.cascades == (TIMEOUT,)
    assert got.evidence == (XID, TIMEOUT)
    assert got.implicated == VERDICT.implicated
    assert (got.kind, got.category, got.confidence) == (Kind.CRASH, Category.GPU_HARDWARE, 0.95)
    assert (got.fault_time, got.detected_at, got.basis) == (1000.5, 1001.0, VERDICT.basis)


def test_incident_insert_is_idempotent_per_key(store: Store) -> None:
    first = store.add_incident("j1", 0, VERDICT, detected_at=1001.0)
    # A restarted service reaching the same verdict later gets the same row back.
    assert store.add_incident("j1", 0, VERDICT, detected_at=1500.0) == first
    assert store.get_incident(first).detected_at == 1001.0
    # A different attempt, kind or root signature is a different incident.
    other_attempt = store.add_incident("j1", 1, VERDICT, detected_at=1600.0)
    hang = Verdict(failure=True, kind=Kind.HANG, category=Category.UNKNOWN, confidence=0.5)
    no_root = store.add_incident("j1", 1, hang, detected_at=1700.0)
    assert store.add_incident("j1", 1, hang, detected_at=1800.0) == no_root
    assert len({first, other_attempt, no_root}) == 3
    assert [i.id for i in store.list_incidents("j1")] == [first, other_attempt, no_root]
    assert store.list_incidents("other") == []
    assert store.get_incident(no_root).fault_time is None


def test_idempotent_across_store_instances(tmp_path: Path) -> None:
    url = sqlite_url(str(tmp_path / "tm.db"))
    first = Store(url).add_incident("j1", 0, VERDICT, detected_at=1.0)
    assert Store(url).add_incident("j1", 0, VERDICT, detected_at=2.0) == first


def test_unknown_incident(store: Store) -> None:
    with pytest.raises(NotFound, match="unknown incident 7"):
        store.get_incident(7)


def test_holds_open_release_and_age(store: Store) -> None:
    first = store.record_hold("j1", held_at=10.0, by="service")
    assert store.record_hold("j1", held_at=50.0, by="service") == first  # already held
    store.record_hold("j2", held_at=40.0, by="service")
    assert [h.job_id for h in store.holds_older_than(30.0)] == ["j1"]
    assert [h.job_id for h in store.open_holds()] == ["j1", "j2"]
    assert store.release_hold("j1", released_at=70.0) == 1
    assert store.release_hold("j1", released_at=80.0) == 0
    assert [h.job_id for h in store.holds_older_than(100.0)] == ["j2"]


def test_node_history(store: Store) -> None:
    store.record_node_event(
        "node2", time=5.0, job_id="j1", incident_id=1, category=Category.GPU_HARDWARE, strong=True
    )
    store.record_node_event("node2", time=6.0, drained=True, reason="trainmedic: xid79")
    store.record_node_event("node3", time=7.0, category=Category.NETWORK_HARDWARE)
    node2 = store.node_history("node2")
    assert [(e.time, e.strong, e.drained) for e in node2] == [
        (5.0, True, False),
        (6.0, False, True),
    ]
    assert node2[0].category is Category.GPU_HARDWARE and node2[1].category is None
    assert len(store.node_history()) == 3
