"""Crash detection: a failed job state from the scheduler, or a fatal log line while it runs.

A COMPLETED or CANCELLED job is not a crash (``JobState.is_failure`` excludes both); a
preemption or a time limit is reported as a crash whose category attribution will set to
``scheduler``, so the policy can requeue it without spending a retry budget.
"""

from __future__ import annotations

from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.model import ActionHint, Event, Kind, Role
from trainmedic.core.observations import JobStatus


def crash_from_status(
    status: JobStatus, now: float, iteration: int | None = None
) -> Anomaly | None:
    """An anomaly when the scheduler reports a failed terminal state."""
    if not status.state.is_failure():
        return None
    code = "" if status.exit_code is None else f", exit code {status.exit_code}"
    reason = f" ({status.reason})" if status.reason else ""
    return Anomaly(
        kind=Kind.CRASH,
        job_id=status.job_id,
        detected_at=now,
        since=status.time,
        trigger=Trigger.JOB_STATE,
        basis=f"scheduler reports {status.state.value}{code}{reason}",
        nodes=status.nodes,
        iteration=iteration,
    )


def is_fatal_event(event: Event) -> bool:
    """A root-cause-capable crash line that is not tagged as harmless (e.g. Xid 63)."""
    return (
        event.role is Role.PRIMARY
        and event.kind is Kind.CRASH
        and event.action_hint is not ActionHint.IGNORE
    )


def crash_from_event(
    job_id: str, event: Event, now: float, iteration: int | None = None
) -> Anomaly | None:
    """An anomaly for a fatal event seen while the job runs (the caller checks it runs)."""
    if not is_fatal_event(event):
        return None
    where = f" on {event.node}" if event.node else ""
    return Anomaly(
        kind=Kind.CRASH,
        job_id=job_id,
        detected_at=now,
        since=event.timestamp if event.timestamp is not None else now,
        trigger=Trigger.FATAL_LOG,
        basis=f"fatal {event.signature} ({event.evidence.value}){where}: {event.text[:200]}",
        ranks=() if event.rank is None else (event.rank,),
        nodes=() if event.node is None else (event.node,),
        evidence=(event,),
        category=event.category,
        iteration=iteration,
    )
