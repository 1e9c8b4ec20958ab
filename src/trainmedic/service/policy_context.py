"""Build the policy's :class:`PolicyContext` from what the store remembers.

Everything here reads stored records and returns values; the service calls it at decision
time. It is rebuilt from the store every time, so a service restarted after ``kill -9``
decides exactly as the one that died would have.

"A new checkpoint appeared during attempt k" is read from the attempts table: attempt k+1
resumed (its first iteration) past where attempt k resumed. "Progress since the previous
failure" compares the iteration reached now with the iteration the previous failure reached.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from trainmedic.core.engine.engine import Finding
from trainmedic.core.model import Category
from trainmedic.core.policy.config import PolicyConfig
from trainmedic.core.policy.context import AttemptRecord, PolicyContext
from trainmedic.core.states import NodeState
from trainmedic.schedulers.base import ClusterSnapshot
from trainmedic.store import AttemptRecord as StoredAttempt
from trainmedic.store import IncidentRecord, Store


def _resumed_at(attempts: Sequence[StoredAttempt], attempt: int) -> int | None:
    for record in attempts:
        if record.attempt == attempt:
            return record.first_iteration
    return None


def _reached(attempts: Sequence[StoredAttempt], attempt: int) -> int | None:
    for record in attempts:
        if record.attempt == attempt:
            return record.last_iteration
    return None


def earlier_failures(
    incidents: Sequence[IncidentRecord], attempts: Sequence[StoredAttempt], current_attempt: int
) -> tuple[AttemptRecord, ...]:
    """One record per earlier failed attempt (its first crash/hang incident), oldest first."""
    by_attempt: dict[int, IncidentRecord] = {}
    for incident in sorted(incidents, key=lambda i: (i.attempt, i.detected_at)):
        if incident.attempt < current_attempt and incident.kind.value in ("crash", "hang"):
            by_attempt.setdefault(incident.attempt, incident)
    records: list[AttemptRecord] = []
    for attempt, incident in sorted(by_attempt.items()):
        start = _resumed_at(attempts, attempt)
        following = _resumed_at(attempts, attempt + 1)
        nodes = next((a.nodes for a in attempts if a.attempt == attempt), ())
        records.append(
            AttemptRecord(
                attempt=attempt,
                category=incident.category,
                signature=incident.root_cause.signature if incident.root_cause else None,
                iteration=_reached(attempts, attempt),
                nodes=nodes,
                new_checkpoint=start is not None and following is not None and following > start,
            )
        )
    return tuple(records)


def build_context(
    store: Store,
    finding: Finding,
    snapshot: ClusterSnapshot,
    config: PolicyConfig,
    *,
    now: float,
    new_checkpoint: bool,
    resumed_at: int | None = None,
) -> PolicyContext:
    job_id = finding.job_id
    attempts = store.list_attempts(job_id)
    earlier = earlier_failures(store.list_incidents(job_id), attempts, finding.attempt)
    previous_iteration = earlier[-1].iteration if earlier else None
    # An attempt that failed before its first progress line reached the iteration it resumed
    # at: the newest checkpoint. Without this, the same error right after a resume would not
    # look like the same failure.
    iteration = finding.iteration if finding.iteration is not None else resumed_at
    progressed = 0
    if iteration is not None and previous_iteration is not None:
        progressed = max(0, iteration - previous_iteration)
    # Budget: failures that made no progress since the one before them.
    budget: Counter[Category] = Counter()
    for index, record in enumerate(earlier):
        before = earlier[index - 1] if index else None
        moved = record.new_checkpoint or (
            before is not None
            and record.iteration is not None
            and before.iteration is not None
            and record.iteration > before.iteration
        )
        if not moved:
            budget[record.category] += 1
    history: Counter[str] = Counter()
    # The circuit breaker's count: drains advised in the window since the last reset,
    # cluster-wide (core.policy.breaker).
    breaker = store.breaker_state()
    since = now - config.drain_window_s
    if breaker.reset_at is not None:
        since = max(since, breaker.reset_at)
    drains = store.advised_drains(since)
    for event in store.node_history():
        recent = now - event.time <= config.repeat_offender_window_s
        if event.incident_id is not None and not event.drained and recent:
            history[event.node] += 1
    current = finding.nodes
    spares = tuple(
        node.name
        for node in snapshot.nodes
        if node.name not in current
        and not node.drain
        and node.state in (NodeState.IDLE, NodeState.MIXED)
    )
    return PolicyContext(
        job_id=job_id,
        attempts=earlier,
        iteration=iteration,
        report_interval_steps=finding.report_interval_steps,
        new_checkpoint=new_checkpoint,
        progressed_iterations=progressed,
        budget_used=dict(budget),
        node_history=dict(history),
        current_nodes=current,
        healthy_spares=spares,
        cluster_size=len(snapshot.nodes),
        recent_drains=drains,
        breaker_tripped=breaker.tripped,
        config=config,
        system_events=tuple(e for e in finding.evidence if e.evidence.is_system()),
    )
