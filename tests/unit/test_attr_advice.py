"""Advice rules: restart excluding/draining, stop, restart, none."""

from __future__ import annotations

from trainmedic.core.model import (
    NO_FAILURE,
    Action,
    Advice,
    Category,
    Event,
    EvidenceSource,
    Implicated,
    Kind,
    Role,
    Verdict,
)
from trainmedic.core.policy.context import PolicyContext
from trainmedic.core.policy.decide import decide


def advise(v: Verdict) -> Advice:
    """The advice ``analyze`` gives: the one policy with the offline context."""
    return decide(v, PolicyContext.offline())


def verdict(
    category: Category,
    *,
    nodes: tuple[str, ...] = (),
    strong: bool = False,
    evidence: EvidenceSource = EvidenceSource.APP_LOG,
    confidence: float = 0.9,
) -> Verdict:
    root = Event(
        signature="x.y",
        category=category,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=1,
        text="t",
        evidence=evidence,
        strong=strong,
    )
    return Verdict(
        failure=True,
        kind=Kind.CRASH,
        category=category,
        confidence=confidence,
        root_cause=root,
        implicated=Implicated(nodes=nodes),
    )


def test_no_failure() -> None:
    assert advise(NO_FAILURE).action is Action.NONE


def test_strong_kernel_hardware_drains() -> None:
    a = advise(
        verdict(
            Category.GPU_HARDWARE, nodes=("n1",), strong=True, evidence=EvidenceSource.KERNEL_LOG
        )
    )
    assert a.action is Action.RESTART_EXCLUDING
    assert a.exclude_nodes == ("n1",) and a.drain_nodes == ("n1",)
    assert a.basis


def test_strong_hardware_from_app_stdout_excludes_without_drain() -> None:
    a = advise(verdict(Category.GPU_HARDWARE, nodes=("n1",), strong=True))
    assert a.action is Action.RESTART_EXCLUDING and a.drain_nodes == ()


def test_weak_hardware_excludes_only() -> None:
    a = advise(
        verdict(Category.NETWORK_HARDWARE, nodes=("n2",), evidence=EvidenceSource.KERNEL_LOG)
    )
    assert a.exclude_nodes == ("n2",) and a.drain_nodes == ()


def test_hardware_without_node_restarts() -> None:
    assert advise(verdict(Category.NODE_HARDWARE)).action is Action.RESTART


def test_application_stops_unless_unsure() -> None:
    assert advise(verdict(Category.APPLICATION)).action is Action.STOP
    assert advise(verdict(Category.APPLICATION, confidence=0.3)).action is Action.RESTART


def test_scheduler_storage_unknown_restart() -> None:
    for category in (Category.SCHEDULER, Category.STORAGE, Category.UNKNOWN):
        assert advise(verdict(category)).action is Action.RESTART


def test_low_confidence_hardware_does_not_shrink_the_job() -> None:
    a = advise(verdict(Category.NODE_HARDWARE, nodes=("n3",), confidence=0.4))
    assert a.action is Action.RESTART and a.exclude_nodes == ()
