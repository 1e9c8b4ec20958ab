"""Evidence the engine makes from non-log signals, and the verdict for an anomaly.

The scheduler's word about a job or a node is evidence too: a node the scheduler marks DOWN
under a running job is node hardware as far as trainmedic can tell (scheduler-sourced, so it
may justify a drain), a preempted or timed-out job is the scheduler's doing. These become
``Event`` values like any matched line, so attribution treats every source alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from trainmedic.core.attribute.smells import smell_verdict
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
        # NODE_FAIL says a node of the job failed, not which: named only for a one-node job
        # (the node DOWN event names it otherwise; never drain a guess, core.policy.trust).
        node=status.nodes[0]
        if status.state is JobState.NODE_FAIL and len(status.nodes) == 1
        else None,
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


def verdict_for_anomaly(
    anomaly: Anomaly, attributed: Verdict | None, suspects: Sequence[Event] = ()
) -> Verdict:
    """Combine what the detector saw (kind, when, which rank) with what attribution found
    (category, root cause). The detector decides the kind: a hang stays a hang even when
    attribution finds the crash line that caused it. A failure no line explains and the
    detector cannot name is put on the job's configuration smells (``suspects``), as a guess."""
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
        guess = (
            None
            if anomaly.category
            else smell_verdict(suspects, anomaly.kind, Implicated(ranks=anomaly.ranks))
        )
        if guess is not None:
            return replace(guess, basis=f"{anomaly.basis}; {guess.basis}")
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
        implicated = _named_by_evidence(anomaly) if category.is_hardware() else implicated
    return replace(
        attributed,
        kind=anomaly.kind,
        category=category,
        implicated=implicated,
        basis=f"{anomaly.basis}; {attributed.basis}" if attributed.basis else anomaly.basis,
    )


def _named_by_evidence(anomaly: Anomaly) -> Implicated:
    """The detector's nodes that its own evidence names. A job-state crash or a hang lists
    every node of the job, which says nothing about which one failed: a hardware verdict
    resting on no line that names a node implicates none (core.policy.trust)."""
    named = {event.node for event in anomaly.evidence}
    return Implicated(nodes=tuple(n for n in anomaly.nodes if n in named), ranks=anomaly.ranks)


@dataclass(frozen=True, slots=True)
class NodeDebounce:
    """When an unhealthy node state the scheduler reports becomes evidence.

    One poll is not a node failure: Slurm shows a node ``NOT_RESPONDING`` for a missed ping,
    and for about a second after an operator's ``scontrol update state=resume`` (``idle*``
    until slurmd registers again, measured on the lab cluster). Such a state counts once it
    held for ``min_polls`` polls in a row spanning ``min_s`` seconds. ``DOWN``/``FAIL`` are
    the scheduler's verdict (it already requeued the job) and count at once, except within
    ``resume_grace_s`` after the node came back, when they are debounced too.
    """

    min_polls: int = 3
    min_s: float = 20.0
    resume_grace_s: float = 60.0


@dataclass(slots=True)
class _NodeSeen:
    state: NodeState
    since: float  # first poll showing this state
    polls: int = 1
    reported: bool = False
    recovered_at: float | None = None  # last time the node came back healthy


class NodeStateFilter:
    """Which node statuses are news: a state change, and an unhealthy state only once it held
    (``NodeDebounce``). ``observe`` returns the status to turn into evidence, stamped with the
    time the state began, or None."""

    def __init__(self, debounce: NodeDebounce | None = None) -> None:
        self.debounce = debounce or NodeDebounce()
        self._seen: dict[str, _NodeSeen] = {}

    def observe(self, status: NodeStatus) -> NodeStatus | None:
        seen = self._seen.get(status.node)
        if seen is None or seen.state is not status.state:
            recovered = seen.recovered_at if seen else None
            if seen is not None and seen.state.is_unhealthy() and not status.state.is_unhealthy():
                recovered = status.time
            seen = _NodeSeen(status.state, status.time, recovered_at=recovered)
            self._seen[status.node] = seen
        elif status.time > seen.since:
            seen.polls += 1
        if seen.reported or not status.state.is_unhealthy() or not self._held(seen, status):
            return None
        seen.reported = True
        return replace(status, time=seen.since)

    def _held(self, seen: _NodeSeen, status: NodeStatus) -> bool:
        rule = self.debounce
        resumed = (
            seen.recovered_at is not None and seen.since - seen.recovered_at <= rule.resume_grace_s
        )
        if status.state is not NodeState.NOT_RESPONDING and not resumed:
            return True
        return seen.polls >= rule.min_polls and status.time - seen.since >= rule.min_s
