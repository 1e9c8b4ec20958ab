"""Advice: generation-numbered intent per (job, attempt), claimed by exactly one executor.

How an executor uses this (and survives ``kill -9`` at any point)::

    for adv in store.active_advice():
        if not store.claim_advice(adv.id, executor_id):   # atomic compare-and-set
            continue                                       # another executor owns it
        for step in plan(adv):                             # e.g. "hold", "exclude", "release"
            if step in store.get_advice(adv.id).steps_done:
                continue                                   # issued before a crash: never twice
            adapter.do(step)
            store.mark_step_done(adv.id, step)
        store.mark_applied(adv.id, now=time.time())
        ...                                                # later, when the scheduler shows it
        store.set_advice_status(adv.id, AdviceStatus.CONVERGED, now=time.time())

Use a stable ``executor_id`` (e.g. ``"service@<host>"``): a restarted executor with the same id
re-claims the advice it was applying and carries on from ``steps_done``.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import Connection

from trainmedic.core.model import Advice
from trainmedic.store import schema
from trainmedic.store.base import DuplicateKey, InvalidTransition, NotFound, StoreBase
from trainmedic.store.codec import advice_from_row
from trainmedic.store.records import (
    ADVICE_TRANSITIONS,
    AdviceMode,
    AdviceRecord,
    AdviceStatus,
    NodeHistoryEntry,
)

_advice = schema.advice
_ACTIVE = (AdviceStatus.PENDING.value, AdviceStatus.APPLYING.value)
GENERATION_RETRIES = 20


class AdviceRepository(StoreBase):
    def put_advice(
        self,
        job_id: str,
        attempt: int,
        advice: Advice,
        *,
        mode: AdviceMode,
        now: float,
        incident_id: int | None = None,
    ) -> AdviceRecord:
        """Store advice as the next generation for (job, attempt): max(generation) + 1.

        Monitor mode stores it as ``recorded``, action mode as ``pending``. Idempotent per
        incident: advice for an incident that already has advice returns that row (a restarted
        service re-deriving its decision never creates a second action). A new generation
        supersedes the job's older ``pending`` advice (marked ``abandoned``); advice already
        being applied is left to its executor.
        """
        # SQLite serialises writers (BEGIN IMMEDIATE); on PostgreSQL two writers can read the
        # same max(generation), and the loser retries after the unique constraint refuses it.
        for _ in range(GENERATION_RETRIES):
            try:
                with self._write(f"put advice for {job_id}/{attempt}") as conn:
                    if incident_id is not None:
                        existing = self._advice_of_incident_in(conn, incident_id)
                        if existing is not None:
                            return existing
                    return self._new_generation_in(
                        conn, job_id, attempt, advice, mode, now, incident_id
                    )
            except DuplicateKey:
                continue  # a concurrent writer took this generation (or incident): try again
        raise DuplicateKey(f"advice for {job_id}/{attempt}: generation contention")

    @staticmethod
    def _new_generation_in(
        conn: Connection,
        job_id: str,
        attempt: int,
        advice: Advice,
        mode: AdviceMode,
        now: float,
        incident_id: int | None,
    ) -> AdviceRecord:
        """Within ``conn``'s transaction: insert the advice as the attempt's next generation."""
        same_attempt = (_advice.c.job_id == job_id) & (_advice.c.attempt == attempt)
        status = AdviceStatus.RECORDED if mode is AdviceMode.MONITOR else AdviceStatus.PENDING
        latest = conn.execute(
            sa.select(sa.func.max(_advice.c.generation)).where(same_attempt)
        ).scalar_one_or_none()
        generation = (latest or 0) + 1
        new_id = conn.execute(
            sa.insert(_advice)
            .values(
                job_id=job_id,
                attempt=attempt,
                generation=generation,
                incident_id=incident_id,
                action=advice.action.value,
                exclude_nodes=list(advice.exclude_nodes),
                drain_nodes=list(advice.drain_nodes),
                basis=advice.basis,
                mode=mode.value,
                status=status.value,
                created_at=now,
                steps_done=[],
                note="",
            )
            .returning(_advice.c.id)
        ).scalar_one()
        conn.execute(
            sa.update(_advice)
            .where(
                (_advice.c.job_id == job_id)
                & (_advice.c.status == AdviceStatus.PENDING.value)
                & (_advice.c.id != new_id)
            )
            .values(
                status=AdviceStatus.ABANDONED.value,
                note=f"superseded by advice {new_id} (generation {generation})",
            )
        )
        row = conn.execute(sa.select(_advice).where(_advice.c.id == new_id)).mappings().one()
        return advice_from_row(row)

    @staticmethod
    def _advice_of_incident_in(conn: Connection, incident_id: int) -> AdviceRecord | None:
        query = sa.select(_advice).where(_advice.c.incident_id == incident_id)
        row = conn.execute(query.order_by(_advice.c.id)).mappings().first()
        return advice_from_row(row) if row else None

    def get_advice(self, advice_id: int) -> AdviceRecord:
        with self._read(f"get advice {advice_id}") as conn:
            row = (
                conn.execute(sa.select(_advice).where(_advice.c.id == advice_id)).mappings().first()
            )
        if row is None:
            raise NotFound(f"unknown advice {advice_id}")
        return advice_from_row(row)

    def list_advice(
        self, job_id: str | None = None, *, active_only: bool = False
    ) -> list[AdviceRecord]:
        """Oldest first. ``active_only``: pending or applying."""
        query = sa.select(_advice).order_by(_advice.c.id)
        if job_id is not None:
            query = query.where(_advice.c.job_id == job_id)
        if active_only:
            query = query.where(_advice.c.status.in_(_ACTIVE))
        with self._read("list advice") as conn:
            return [advice_from_row(r) for r in conn.execute(query).mappings()]

    def active_advice(self, job_id: str | None = None) -> list[AdviceRecord]:
        """Advice an executor still has to carry out (pending or applying), oldest first."""
        return self.list_advice(job_id, active_only=True)

    def claim_advice(self, advice_id: int, executor_id: str) -> bool:
        """Atomic compare-and-set: True for exactly one executor per advice.

        Succeeds when the advice is ``pending`` (it becomes ``applying``, owned by
        ``executor_id``) or already ``applying`` under this same ``executor_id`` (a restart).
        """
        with self._write(f"claim advice {advice_id}") as conn:
            claimed = conn.execute(
                sa.update(_advice)
                .where(
                    (_advice.c.id == advice_id)
                    & (
                        (_advice.c.status == AdviceStatus.PENDING.value)
                        | (
                            (_advice.c.status == AdviceStatus.APPLYING.value)
                            & (_advice.c.claimed_by == executor_id)
                        )
                    )
                )
                .values(status=AdviceStatus.APPLYING.value, claimed_by=executor_id)
            ).rowcount
        return bool(claimed)

    def adopt_applying_advice(self, executor_id: str) -> int:
        """A new leader takes over every advice another executor left ``applying`` (that
        executor lost the lead, so it no longer acts). Returns how many were adopted."""
        with self._write("adopt applying advice") as conn:
            return int(
                conn.execute(
                    sa.update(_advice)
                    .where(
                        (_advice.c.status == AdviceStatus.APPLYING.value)
                        & (_advice.c.claimed_by != executor_id)
                    )
                    .values(claimed_by=executor_id)
                ).rowcount
            )

    def mark_step_done(
        self, advice_id: int, step: str, *, history: NodeHistoryEntry | None = None
    ) -> bool:
        """Record that a scheduler step was issued. False when it was already recorded.

        ``history`` (a drain) is appended to its node's history in the same transaction,
        so a step recorded twice (a restart) never writes it twice, and one recorded always
        has it."""
        with self._write(f"mark step {step} of advice {advice_id}") as conn:
            done = conn.execute(
                sa.select(_advice.c.steps_done).where(_advice.c.id == advice_id).with_for_update()
            ).scalar_one_or_none()
            if done is None:
                raise NotFound(f"unknown advice {advice_id}")
            if step in done:
                return False
            conn.execute(
                sa.update(_advice).where(_advice.c.id == advice_id).values(steps_done=[*done, step])
            )
            if history is not None:
                conn.execute(
                    sa.insert(schema.node_history).values(
                        node=history.node,
                        time=history.time,
                        job_id=history.job_id,
                        incident_id=history.incident_id,
                        category=None,
                        strong=False,
                        drained=history.drained,
                        reason=history.reason,
                    )
                )
        return True

    def mark_applied(self, advice_id: int, *, now: float) -> None:
        """Every step has been issued (the first call's time is kept)."""
        with self._write(f"mark advice {advice_id} applied") as conn:
            updated = conn.execute(
                sa.update(_advice)
                .where(_advice.c.id == advice_id)
                .values(applied_at=sa.func.coalesce(_advice.c.applied_at, now))
            ).rowcount
        if not updated:
            raise NotFound(f"unknown advice {advice_id}")

    def set_advice_status(
        self, advice_id: int, status: AdviceStatus, *, now: float, note: str | None = None
    ) -> AdviceRecord:
        """Move along ``ADVICE_TRANSITIONS``; the same status again is a no-op (idempotent).

        ``converged`` sets ``converged_at`` (and ``applied_at`` if unset); back to
        ``pending`` drops the claim. Raises StoreError for a move the table does not allow.
        """
        with self._write(f"set advice {advice_id} {status.value}") as conn:
            row = (
                conn.execute(sa.select(_advice).where(_advice.c.id == advice_id).with_for_update())
                .mappings()
                .first()
            )
            if row is None:
                raise NotFound(f"unknown advice {advice_id}")
            current = AdviceStatus(row["status"])
            if current is not status and status not in ADVICE_TRANSITIONS[current]:
                raise InvalidTransition(
                    f"advice {advice_id}: {current.value} -> {status.value} is not allowed"
                )
            values: dict[str, object] = {"status": status.value}
            if note is not None:
                values["note"] = note
            if current is not status and status is AdviceStatus.CONVERGED:
                values["converged_at"] = now
                values["applied_at"] = sa.func.coalesce(_advice.c.applied_at, now)
            if status is AdviceStatus.PENDING:
                values["claimed_by"] = None
            # Compare-and-set on the status read above, in case a reader raced us.
            conn.execute(
                sa.update(_advice)
                .where((_advice.c.id == advice_id) & (_advice.c.status == current.value))
                .values(**values)
            )
            updated = conn.execute(sa.select(_advice).where(_advice.c.id == advice_id)).mappings()
            return advice_from_row(updated.one())
