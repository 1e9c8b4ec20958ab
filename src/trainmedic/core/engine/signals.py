"""Evidence the engine makes from non-log signals, and the verdict for an anomaly.

The scheduler's word about a job or a node is evidence too: a node the scheduler marks DOWN
under a running job is node hardware as far as trainmedic can tell (scheduler-sourced, so it
may justify a drain), a preempted or timed-out job is the scheduler's doing. These become
``Event`` values like any matched line, so attribution treats every source alike.
"""

from __future__ import annotations

from dataclasses import replace

from trainmedic.core.detect.anomaly import Anomaly
from trainmedic.core.model import (
    ActionHint,
    Category,
    Event,
    EvidenceSource,
    Implicated,
    Kind,
    Role,
    Verdict,
)
from trainmedic.core.observations import JobStatus, NodeStatus
from trainmedic.core.states import JobState, NodeState

# (category, strong) for job states that name their own cause.
_JOB_STATE_CAUSES: dict[JobState, tuple[str, Category, bool]] = {
    JobState.NODE_FAIL: ("scheduler.job_node_fail", Category.NODE_HARDWARE, True),
    JobState.BOOT_FAIL: ("scheduler.job_boot_fail", Category.NODE_HARDWARE, True),
    JobState.PREEMPTED: ("scheduler.job_preempted", Category.SCHEDULER, False),
    JobState.TIMEOUT: ("scheduler.job_time_limit", Category.SCHEDULER, False),
    JobState.DEADLINE: ("scheduler.job_deadline", Category.SCHEDULER, False),
}

_NODE_STATE_CAUSES: dict[NodeState, str] = {
    NodeState.DOWN: "scheduler.node_down",
    NodeState.FAIL: "scheduler.node_fail",
    NodeState.NOT_RESPONDING: "scheduler.node_not_responding",
}


def job_status_event(status: JobStatus) -> Event | None:
    """An event for a job state that names its cause, else None."""
    cause = _JOB_STATE_CAUSES.get(status.state)
    if cause is None:
        return None
    signature, category, strong = cause
    reason = f" ({status.reason})" if status.reason else ""
    return Event(
        signature=signature,
        category=category,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=0,
        text=f"scheduler: job {status.job_id} {status.state.value}{reason}",
        source="scheduler",
        evidence=EvidenceSource.SCHEDULER,
        timestamp=status.time,
        node=status.nodes[0] if status.state is JobState.NODE_FAIL and status.nodes else None,
        action_hint=ActionHint.REQUEUE if category is Category.SCHEDULER else ActionHint.NONE,
        strong=strong,
    )


def node_status_event(status: NodeStatus) -> Event | None:
    """An event for a node the scheduler reports unhealthy, else None."""
    signature = _NODE_STATE_CAUSES.get(status.state)
    if signature is None:
        return None
    reason = f" ({status.reason})" if status.reason else ""
    return Event(
        signature=signature,
        category=Category.NODE_HARDWARE,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=0,
        text=f"scheduler: node {status.node} {status.state.value}{reason}",
        source="scheduler",
        evidence=EvidenceSource.SCHEDULER,
        timestamp=status.time,
        node=status.node,
        action_hint=ActionHint.REBOOT_NODE,
        strong=True,
    )


def verdict_for_anomaly(anomaly: Anomaly, attributed: Verdict | None) -> Verdict:
    """Combine what the detector saw (kind, when, which rank) with what attribution found
    (category, root cause). The detector decides the kind: a hang stays a hang even when
    attribution finds the crash line that caused it."""
    from_detector = Implicated(nodes=anomaly.nodes, ranks=anomaly.ranks)
    if anomaly.kind is Kind.STRAGGLER:
        return Verdict(
            failure=True,
            kind=Kind.STRAGGLER,
            category=anomaly.category or Category.UNKNOWN,
            confidence=0.6,
            implicated=from_detector,
            basis=anomaly.basis,
        )
    if attributed is None or not attributed.failure:
        return Verdict(
            failure=True,
            kind=anomaly.kind,
            category=anomaly.category or Category.UNKNOWN,
            confidence=0.5 if anomaly.category else 0.3,
            root_cause=anomaly.evidence[0] if anomaly.evidence else None,
            implicated=from_detector if anomaly.category else Implicated(ranks=anomaly.ranks),
            basis=anomaly.basis,
        )
    category = attributed.category
    if anomaly.nan and category is not Category.APPLICATION:
        category = Category.APPLICATION  # non-finite loss: the job's numerics, not a node
    implicated = attributed.implicated
    if not implicated.nodes and not implicated.ranks:
        implicated = from_detector if category.is_hardware() else implicated
    return replace(
        attributed,
        kind=anomaly.kind,
        category=category,
        implicated=implicated,
        basis=f"{anomaly.basis}; {attributed.basis}" if attributed.basis else anomaly.basis,
    )
