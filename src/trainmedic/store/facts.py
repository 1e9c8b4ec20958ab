"""The store's records as the pure accounting's facts (``trainmedic.core.accounting``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from trainmedic.core.accounting import (
    AdviceFacts,
    AttemptFacts,
    CheckpointFacts,
    FeedbackFacts,
    IncidentFacts,
    JobFacts,
    NodeEventFacts,
)
from trainmedic.core.states import JobState
from trainmedic.store.accounting import CheckpointRecord, FeedbackRecord
from trainmedic.store.records import (
    AdviceMode,
    AdviceRecord,
    AttemptRecord,
    IncidentRecord,
    JobRecord,
    NodeEvent,
)

if TYPE_CHECKING:
    from trainmedic.store import Store


def is_terminal(state: str) -> bool:
    try:
        return JobState(state).is_terminal()
    except ValueError:
        return False


def attempt_facts(a: AttemptRecord) -> AttemptFacts:
    return AttemptFacts(
        attempt=a.attempt,
        started_at=a.started_at,
        ended_at=a.ended_at,
        end_state=a.end_state,
        nodes=a.nodes,
        first_iteration=a.first_iteration,
        last_iteration=a.last_iteration,
        first_progress_at=a.first_progress_at,
        last_progress_at=a.last_progress_at,
    )


def incident_facts(i: IncidentRecord) -> IncidentFacts:
    return IncidentFacts(
        id=i.id,
        attempt=i.attempt,
        kind=i.kind,
        category=i.category,
        detected_at=i.detected_at,
        fault_time=i.fault_time,
        nodes=i.implicated.nodes,
    )


def advice_facts(a: AdviceRecord) -> AdviceFacts:
    return AdviceFacts(
        id=a.id,
        attempt=a.attempt,
        action=a.action,
        monitor=a.mode is AdviceMode.MONITOR,
        status=a.status.value,
        created_at=a.created_at,
        incident_id=a.incident_id,
        applied_at=a.applied_at,
        converged_at=a.converged_at,
    )


def job_facts(
    job: JobRecord,
    attempts: Iterable[AttemptRecord],
    checkpoints: Iterable[CheckpointRecord],
    incidents: Iterable[IncidentRecord],
    advice: Iterable[AdviceRecord],
) -> JobFacts:
    """One job's facts; the other arguments may hold other jobs' records (filtered here)."""
    mine = job.job_id
    return JobFacts(
        job_id=mine,
        registered_at=job.registered_at,
        state=job.state,
        terminal=is_terminal(job.state),
        attempts=tuple(attempt_facts(a) for a in attempts if a.job_id == mine),
        checkpoints=tuple(
            CheckpointFacts(c.attempt, c.iteration, c.begun_at, c.saved_at)
            for c in checkpoints
            if c.job_id == mine
        ),
        incidents=tuple(incident_facts(i) for i in incidents if i.job_id == mine),
        advice=tuple(advice_facts(a) for a in advice if a.job_id == mine),
    )


def node_event_facts(e: NodeEvent) -> NodeEventFacts:
    return NodeEventFacts(
        node=e.node,
        time=e.time,
        job_id=e.job_id,
        incident_id=e.incident_id,
        category=e.category,
        strong=e.strong,
        drained=e.drained,
        reason=e.reason,
    )


def feedback_facts(
    feedback: Iterable[FeedbackRecord],
    advice: Sequence[AdviceRecord],
    incidents: Sequence[IncidentRecord],
) -> list[FeedbackFacts]:
    by_advice = {a.id: a for a in advice}
    category = {i.id: i.category for i in incidents}
    out: list[FeedbackFacts] = []
    for f in feedback:
        adv = by_advice.get(f.advice_id)
        incident = adv.incident_id if adv is not None else None
        out.append(
            FeedbackFacts(
                advice_id=f.advice_id,
                time=f.time,
                agree=f.agree,
                action_taken=f.action_taken,
                category=category.get(incident) if incident is not None else None,
                advised_action=adv.action if adv is not None else None,
            )
        )
    return out


def load_job_facts(store: Store, job_id: str | None = None) -> list[JobFacts]:
    """Every job's facts (or one job's: [] when unknown), read from ``store``."""
    jobs = store.list_jobs()
    if job_id is not None:
        jobs = [j for j in jobs if j.job_id == job_id]
        if not jobs:
            return []
    attempts = store.list_attempts(job_id)
    checkpoints = store.list_checkpoints(job_id)
    incidents = store.list_incidents(job_id)
    advice = store.list_advice(job_id)
    return [job_facts(j, attempts, checkpoints, incidents, advice) for j in jobs]


def load_node_events(store: Store, node: str | None = None) -> list[NodeEventFacts]:
    return [node_event_facts(e) for e in store.node_history(node)]


def load_feedback(store: Store) -> list[FeedbackFacts]:
    return feedback_facts(store.list_feedback(), store.list_advice(), store.list_incidents())
