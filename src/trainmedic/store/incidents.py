"""Incidents: one stored verdict per (job, attempt, kind, root signature)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy import Connection

from trainmedic.core.model import Event, Verdict
from trainmedic.store import schema
from trainmedic.store.base import DuplicateKey, NotFound, StoreBase
from trainmedic.store.codec import event_to_dict, implicated_to_dict, incident_from_row
from trainmedic.store.records import IncidentRecord

_incidents = schema.incidents


class IncidentsRepository(StoreBase):
    def add_incident(
        self,
        job_id: str,
        attempt: int,
        verdict: Verdict,
        *,
        detected_at: float,
        fault_time: float | None = None,
        evidence: Sequence[Event] = (),
    ) -> int:
        """Store a verdict and return its incident id.

        Idempotent on (job_id, attempt, verdict.kind, root signature): a service restarted
        after ``kill -9`` that reaches the same verdict again gets the first row's id back,
        and that row is left as it was (its ``detected_at`` stays the first detection).
        ``fault_time`` is when the fault happened, if a source knows it (None = not known,
        which the detection-latency metric leaves out rather than counting as 0).
        """
        args = (job_id, attempt, verdict, detected_at, fault_time, evidence)
        try:
            with self._write(f"add incident for {job_id}") as conn:
                return self._incident_in(conn, *args)
        except DuplicateKey:
            # Another process stored the same incident between our look-up and insert.
            with self._read(f"find incident for {job_id}") as conn:
                return self._incident_in(conn, *args, insert=False)

    @staticmethod
    def _incident_in(
        conn: Connection,
        job_id: str,
        attempt: int,
        verdict: Verdict,
        detected_at: float,
        fault_time: float | None,
        evidence: Sequence[Event],
        *,
        insert: bool = True,
    ) -> int:
        """The incident's id within ``conn``'s transaction, inserted if it is new."""
        signature = verdict.root_cause.signature if verdict.root_cause else ""
        key = (
            (_incidents.c.job_id == job_id)
            & (_incidents.c.attempt == attempt)
            & (_incidents.c.kind == verdict.kind.value)
            & (_incidents.c.root_signature == signature)
        )
        existing = conn.execute(sa.select(_incidents.c.id).where(key)).scalar_one_or_none()
        if existing is not None:
            return int(existing)
        if not insert:
            raise NotFound(f"incident for {job_id}/{attempt} vanished after a conflict")
        values = {
            "job_id": job_id,
            "attempt": attempt,
            "kind": verdict.kind.value,
            "category": verdict.category.value,
            "confidence": verdict.confidence,
            "fault_time": fault_time,
            "detected_at": detected_at,
            "root_signature": signature,
            "root_cause": event_to_dict(verdict.root_cause) if verdict.root_cause else None,
            "implicated": implicated_to_dict(verdict.implicated),
            "evidence": [event_to_dict(e) for e in evidence],
            "cascades": [event_to_dict(e) for e in verdict.cascades],
            "basis": verdict.basis,
        }
        inserted = conn.execute(
            sa.insert(_incidents).values(**values).returning(_incidents.c.id)
        ).scalar_one()
        return int(inserted)

    def get_incident(self, incident_id: int) -> IncidentRecord:
        with self._read(f"get incident {incident_id}") as conn:
            row = (
                conn.execute(sa.select(_incidents).where(_incidents.c.id == incident_id))
                .mappings()
                .first()
            )
        if row is None:
            raise NotFound(f"unknown incident {incident_id}")
        return incident_from_row(row)

    def list_incidents(self, job_id: str | None = None) -> list[IncidentRecord]:
        """Oldest first; all jobs when ``job_id`` is None."""
        query = sa.select(_incidents).order_by(_incidents.c.detected_at, _incidents.c.id)
        if job_id is not None:
            query = query.where(_incidents.c.job_id == job_id)
        with self._read("list incidents") as conn:
            return [incident_from_row(r) for r in conn.execute(query).mappings()]
