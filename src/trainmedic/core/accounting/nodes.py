"""A node's record across jobs: incidents, categories, drains, mean time between incidents.

A lemon node stands out by its count of incidents, its strong hardware evidence and a short
MTBI. MTBI is the mean gap between consecutive incidents that implicated the node: ``None``
("not measured") below two incidents, never 0 or infinity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from trainmedic.core.accounting.facts import NodeEventFacts

SUSPECT_INCIDENTS = 2
"""Incidents (on distinct jobs or attempts) that make an undrained node suspect."""


@dataclass(frozen=True, slots=True)
class NodeAccount:
    node: str
    incidents: int
    categories: dict[str, int]
    strong_evidence: int
    drains: int
    drained: bool  # a drain by trainmedic is on record (the scheduler's view may differ)
    suspect: bool  # not drained, but strong evidence or repeated incidents
    jobs: tuple[str, ...]
    first_incident_at: float | None
    last_incident_at: float | None
    mtbi_s: float | None
    last_seen: float
    events: tuple[NodeEventFacts, ...]


def account_node(node: str, events: Iterable[NodeEventFacts]) -> NodeAccount:
    mine = sorted((e for e in events if e.node == node), key=lambda e: e.time)
    # One incident may be recorded twice for a node (implicated, then drained): count ids once.
    incident_times: dict[int, float] = {}
    categories: Counter[str] = Counter()
    for event in mine:
        if event.incident_id is None or event.incident_id in incident_times:
            continue
        incident_times[event.incident_id] = event.time
        if event.category is not None:
            categories[event.category.value] += 1
    times = sorted(incident_times.values())
    gaps = [b - a for a, b in pairwise(times)]
    drains = sum(1 for e in mine if e.drained)
    strong = sum(1 for e in mine if e.strong)
    return NodeAccount(
        node=node,
        incidents=len(times),
        categories=dict(sorted(categories.items())),
        strong_evidence=strong,
        drains=drains,
        drained=drains > 0,
        suspect=drains == 0 and (strong > 0 or len(times) >= SUSPECT_INCIDENTS),
        jobs=tuple(sorted({e.job_id for e in mine if e.job_id})),
        first_incident_at=times[0] if times else None,
        last_incident_at=times[-1] if times else None,
        mtbi_s=sum(gaps) / len(gaps) if gaps else None,
        last_seen=max((e.time for e in mine), default=0.0),
        events=tuple(mine),
    )


def account_nodes(events: Iterable[NodeEventFacts]) -> list[NodeAccount]:
    """Every node with history, most incidents first (lemons on top), then by name."""
    events = list(events)
    nodes = sorted({e.node for e in events})
    accounts = [account_node(n, events) for n in nodes]
    return sorted(accounts, key=lambda a: (-a.incidents, -a.strong_evidence, a.node))
