"""An incident, its advice and the implicated nodes' history, stored in one transaction.

The service decides advice for a verdict and stores both. Written as two transactions, a
``kill -9`` between them would leave an incident without advice; the restarted service only
repairs that when it re-derives the very same verdict. One transaction leaves either both or
neither, so a restart always finds a decision whole or decides again. The nodes' history
entries go in the same transaction: a "database is locked" between them would otherwise
leave a decision whose nodes never count toward the repeat-offender rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from trainmedic.core.model import Advice, Event, Verdict
from trainmedic.core.policy.trust import NodeCharge
from trainmedic.store import schema
from trainmedic.store.advice import GENERATION_RETRIES, AdviceRepository
from trainmedic.store.base import DuplicateKey
from trainmedic.store.incidents import IncidentsRepository
from trainmedic.store.records import AdviceMode, AdviceRecord


@dataclass(frozen=True, slots=True)
class StoredDecision:
    incident_id: int
    advice: AdviceRecord
    new: bool  # False: this incident and its advice were already stored (a re-derivation)


class DecisionsRepository(IncidentsRepository, AdviceRepository):
    def record_decision(
        self,
        job_id: str,
        attempt: int,
        verdict: Verdict,
        advice: Advice,
        *,
        mode: AdviceMode,
        now: float,
        detected_at: float,
        fault_time: float | None = None,
        evidence: Sequence[Event] = (),
        charges: Sequence[NodeCharge] = (),
    ) -> StoredDecision:
        """Store the verdict as an incident and the advice for it, or return what is stored.

        A new decision also appends each of ``charges`` (the nodes the cluster's own evidence
        implicates: ``core.policy.trust.node_charges``) to its node's history, in the same
        transaction. Idempotent as
        ``add_incident`` and ``put_advice`` are (same keys); ``new`` tells the caller whether
        anything was written.
        """
        for _ in range(GENERATION_RETRIES):
            try:
                with self._write(f"record decision for {job_id}/{attempt}") as conn:
                    incident_id = self._incident_in(
                        conn, job_id, attempt, verdict, detected_at, fault_time, evidence
                    )
                    existing = self._advice_of_incident_in(conn, incident_id)
                    if existing is not None:
                        return StoredDecision(incident_id, existing, new=False)
                    stored = self._new_generation_in(
                        conn, job_id, attempt, advice, mode, now, incident_id
                    )
                    for charge in charges:
                        conn.execute(
                            sa.insert(schema.node_history).values(
                                node=charge.node,
                                time=now,
                                job_id=job_id,
                                incident_id=incident_id,
                                category=verdict.category.value,
                                strong=charge.strong,
                                drained=False,
                                reason=charge.reason,
                            )
                        )
                    return StoredDecision(incident_id, stored, new=True)
            except DuplicateKey:
                continue  # a concurrent writer stored the same incident or generation: again
        raise DuplicateKey(f"decision for {job_id}/{attempt}: contention")
