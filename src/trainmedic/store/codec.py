"""Turn model values into JSON-able dicts for the store's JSON columns, and rows back into
frozen records. Pure functions: no database here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainmedic.core.model import (
    Action,
    ActionHint,
    Category,
    Event,
    EvidenceSource,
    Implicated,
    Kind,
    Role,
)
from trainmedic.store.records import (
    AdviceMode,
    AdviceRecord,
    AdviceStatus,
    AttemptRecord,
    HoldRecord,
    IncidentRecord,
    JobRecord,
    JobSpec,
    NodeEvent,
)

Row = Mapping[Any, Any]  # sqlalchemy RowMapping, or any dict of column values


def event_to_dict(event: Event) -> dict[str, Any]:
    """Every field of an Event; enums as their string values."""
    return {
        "signature": event.signature,
        "category": event.category.value,
        "kind": event.kind.value,
        "role": event.role.value,
        "line": event.line,
        "text": event.text,
        "source": event.source,
        "evidence": event.evidence.value,
        "timestamp": event.timestamp,
        "rank": event.rank,
        "node": event.node,
        "gpu": event.gpu,
        "xid": event.xid,
        "action_hint": event.action_hint.value,
        "strong": event.strong,
        "likely": event.likely,
    }


def event_from_dict(data: Mapping[str, Any]) -> Event:
    return Event(
        signature=str(data["signature"]),
        category=Category(data["category"]),
        kind=Kind(data["kind"]),
        role=Role(data["role"]),
        line=int(data["line"]),
        text=str(data["text"]),
        source=str(data.get("source", "")),
        evidence=EvidenceSource(data.get("evidence", EvidenceSource.APP_LOG.value)),
        timestamp=data.get("timestamp"),
        rank=data.get("rank"),
        node=data.get("node"),
        gpu=data.get("gpu"),
        xid=data.get("xid"),
        action_hint=ActionHint(data.get("action_hint", ActionHint.NONE.value)),
        strong=bool(data.get("strong", False)),
        likely=bool(data.get("likely", False)),
    )


def implicated_to_dict(implicated: Implicated) -> dict[str, list[Any]]:
    return {
        "nodes": list(implicated.nodes),
        "ranks": list(implicated.ranks),
        "gpus": list(implicated.gpus),
    }


def implicated_from_dict(data: Mapping[str, Sequence[Any]]) -> Implicated:
    return Implicated(
        nodes=tuple(str(n) for n in data.get("nodes", ())),
        ranks=tuple(int(r) for r in data.get("ranks", ())),
        gpus=tuple(str(g) for g in data.get("gpus", ())),
    )


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    return {
        "log_paths": list(spec.log_paths),
        "kernel_logs": dict(spec.kernel_logs),
        "checkpoint_dir": spec.checkpoint_dir,
        "nodes": list(spec.nodes),
        "partition": spec.partition,
        "user": spec.user,
        "policy": dict(spec.policy),
        "progress_regex": spec.progress_regex,
    }


def spec_from_dict(data: Mapping[str, Any]) -> JobSpec:
    return JobSpec(
        log_paths=tuple(data.get("log_paths", ())),
        kernel_logs=dict(data.get("kernel_logs", {})),
        checkpoint_dir=str(data.get("checkpoint_dir", "")),
        nodes=tuple(data.get("nodes", ())),
        partition=str(data.get("partition", "")),
        user=str(data.get("user", "")),
        policy=dict(data.get("policy", {})),
        progress_regex=str(data.get("progress_regex", "")),
    )


def job_from_row(row: Row) -> JobRecord:
    return JobRecord(
        job_id=row["job_id"],
        scheduler=row["scheduler"],
        name=row["name"],
        spec=spec_from_dict(row["spec"]),
        registered_at=row["registered_at"],
        state=row["state"],
        attempt=row["attempt"],
        last_progress_at=row["last_progress_at"],
        last_iteration=row["last_iteration"],
        last_checkpoint_iteration=row["last_checkpoint_iteration"],
        last_checkpoint_at=row["last_checkpoint_at"],
    )


def attempt_from_row(row: Row) -> AttemptRecord:
    return AttemptRecord(
        job_id=row["job_id"],
        attempt=row["attempt"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        nodes=tuple(row["nodes"]),
        end_state=row["end_state"],
        first_iteration=row["first_iteration"],
        last_iteration=row["last_iteration"],
        first_progress_at=row["first_progress_at"],
        last_progress_at=row["last_progress_at"],
    )


def incident_from_row(row: Row) -> IncidentRecord:
    root = row["root_cause"]
    return IncidentRecord(
        id=row["id"],
        job_id=row["job_id"],
        attempt=row["attempt"],
        kind=Kind(row["kind"]),
        category=Category(row["category"]),
        confidence=row["confidence"],
        fault_time=row["fault_time"],
        detected_at=row["detected_at"],
        root_cause=event_from_dict(root) if root else None,
        implicated=implicated_from_dict(row["implicated"]),
        evidence=tuple(event_from_dict(e) for e in row["evidence"]),
        cascades=tuple(event_from_dict(e) for e in row["cascades"]),
        basis=row["basis"],
    )


def advice_from_row(row: Row) -> AdviceRecord:
    return AdviceRecord(
        id=row["id"],
        job_id=row["job_id"],
        attempt=row["attempt"],
        generation=row["generation"],
        incident_id=row["incident_id"],
        action=Action(row["action"]),
        exclude_nodes=tuple(row["exclude_nodes"]),
        drain_nodes=tuple(row["drain_nodes"]),
        basis=row["basis"],
        mode=AdviceMode(row["mode"]),
        status=AdviceStatus(row["status"]),
        created_at=row["created_at"],
        applied_at=row["applied_at"],
        converged_at=row["converged_at"],
        claimed_by=row["claimed_by"],
        steps_done=tuple(row["steps_done"]),
        note=row["note"],
    )


def hold_from_row(row: Row) -> HoldRecord:
    return HoldRecord(
        id=row["id"],
        job_id=row["job_id"],
        held_at=row["held_at"],
        released_at=row["released_at"],
        by=row["by"],
    )


def node_event_from_row(row: Row) -> NodeEvent:
    category = row["category"]
    return NodeEvent(
        id=row["id"],
        node=row["node"],
        time=row["time"],
        job_id=row["job_id"],
        incident_id=row["incident_id"],
        category=Category(category) if category else None,
        strong=bool(row["strong"]),
        drained=bool(row["drained"]),
        reason=row["reason"],
    )
