"""The verdicts attribution builds (pure): from a root-cause event (``from_root``: context rules,
the phase the job was in, the culprit rank) and from a mechanism's finding (``from_finding``),
with the confidence a root's kind of evidence earns and the nodes and GPUs it implicates."""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.culprit import Culprit, find_culprit
from trainmedic.core.attribute.eviction_hog import unreserved_disk_hog
from trainmedic.core.attribute.facts import JobFacts
from trainmedic.core.attribute.phase import PhaseFinding, fabric_never_worked
from trainmedic.core.attribute.rules import refine_with_support
from trainmedic.core.attribute.stalled_node import whole_node_missing
from trainmedic.core.model import Category, Event, EvidenceSource, Implicated, Kind, Role, Verdict

_NOT_GPU = frozenset({Category.NODE_HARDWARE, Category.NETWORK_HARDWARE})
# A cascade line that says it ran out of time (a collective, a store, a watchdog).
TIMEOUT = re.compile(r"(?i)timed? ?out|timeout|watchdog")

LIKELY_CONFIDENCE = 0.45
"""Confidence of a root cause whose signature names the usual cause of its message
(``Signature.likely``): as a guess, below the stop threshold."""


def base_confidence(root: Event) -> float:
    if root.likely:
        return LIKELY_CONFIDENCE
    if root.category.is_hardware():
        if root.strong and root.evidence.is_system():
            return 0.95
        return 0.85 if root.evidence.is_system() or root.strong else 0.7
    if root.category is Category.UNKNOWN:
        return 0.5
    return 0.8


def implicated_by(root: Event | None, events: Sequence[Event], culprit: Culprit) -> Implicated:
    nodes: list[str] = []
    gpus: list[str] = []
    if root is not None and root.node:
        nodes.append(root.node)
    if culprit.host and culprit.host not in nodes:
        nodes.append(culprit.host)
    if root is not None and root.gpu and root.category not in _NOT_GPU:
        gpus.append(root.gpu)  # a PCIe port (AER) or a NIC (mlx5) address is not a GPU
    if root is not None and root.category.is_hardware():
        for e in events:
            if e.evidence is not EvidenceSource.KERNEL_LOG or not e.category.is_hardware():
                continue
            same_node = not e.node or not root.node or e.node == root.node
            if e.node and e.node not in nodes and same_node:
                nodes.append(e.node)
            if e.gpu and e.gpu not in gpus and same_node and e.category is Category.GPU_HARDWARE:
                gpus.append(e.gpu)
    ranks = (culprit.rank,) if culprit.rank is not None else ()
    return Implicated(nodes=tuple(nodes), ranks=ranks, gpus=tuple(gpus))


def noise(events: Sequence[Event], root: Event | None) -> tuple[Event, ...]:
    return tuple(e for e in events if e is not root and e.role in (Role.CASCADE, Role.TEARDOWN))


def from_root(
    root: Event,
    events: Sequence[Event],
    facts: JobFacts,
    confidence_cap: float = 1.0,
    note: str = "",
) -> Verdict:
    found = refine_with_support(root, events, facts.neighbours.get(root, ""))
    rule = found[0] if found else None
    category = rule.category if rule else root.category
    confidence = rule.confidence if rule else base_confidence(root)
    benches = [t.bench_rows for t in facts.timelines if t.bench_started]
    phase = None if rule else fabric_never_worked(root, facts.progress, max(benches, default=None))
    phase = phase or (None if rule else whole_node_missing(root, events))
    # A disk eviction whose container, requesting none, filled the node itself.
    phase = phase or (None if rule else unreserved_disk_hog(root))
    if phase is not None:
        category, confidence = phase.category, phase.confidence
    timeouts = [e for e in events if e.role is Role.CASCADE and TIMEOUT.search(e.text)]
    culprit = find_culprit(root, timeouts, facts.child_failures, facts.ranks_seen)
    basis = f"catalogue: root cause {root.signature} at {root.source or 'line'}:{root.line}"
    if found:
        basis += f"; {found[0].basis} ({found[0].id}: {found[1]})"
    if phase is not None:
        basis += f"; {phase.basis}"
    if note:
        basis += f"; {note}"
    return Verdict(
        failure=True,
        kind=root.kind if root.kind is not Kind.NONE else Kind.CRASH,
        category=category,
        confidence=min(confidence, confidence_cap),
        root_cause=root,
        implicated=implicated_by(root, events, culprit),
        cascades=noise(events, root),
        basis=f"{basis}; culprit: {culprit.basis}",
    )


def from_finding(
    finding: PhaseFinding,
    events: Sequence[Event],
    facts: JobFacts,
    timeouts: Sequence[Event],
    layer: str = "mechanism (phase)",
) -> Verdict:
    # A launcher's "rank 3 on gpu07 was SIGKILLed" names the victim; a timeout line would not.
    evidence = finding.evidence
    named = evidence if evidence is not None and evidence.role is Role.TEARDOWN else None
    culprit = find_culprit(named, timeouts, facts.child_failures, facts.ranks_seen)
    return Verdict(
        failure=True,
        kind=finding.kind,
        category=finding.category,
        confidence=finding.confidence,
        root_cause=finding.evidence,
        implicated=implicated_by(None, events, culprit),
        cascades=noise(events, finding.evidence),
        basis=f"{layer}: {finding.basis}; culprit: {culprit.basis}",
    )
