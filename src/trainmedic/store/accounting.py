"""What the accounting needs beyond jobs, attempts, incidents and advice: each checkpoint
write (begun / saved, per attempt) and operators' answers to advice (the scorecard)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from trainmedic.store import schema
from trainmedic.store.base import NotFound, StoreBase

_checkpoints = schema.checkpoints
_feedback = schema.advice_feedback


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    job_id: str
    attempt: int
    iteration: int
    begun_at: float | None
    saved_at: float | None


@dataclass(frozen=True, slots=True)
class FeedbackRecord:
    """One operator answer about one advice: agree or not, and what they actually did."""

    id: int
    advice_id: int
    time: float
    agree: bool
    action_taken: str
    note: str
    by: str


@dataclass(frozen=True, slots=True)
class CheckpointSeen:
    """A checkpoint observation to store: ``begun`` (a write started) or saved."""

    iteration: int
    time: float
    begun: bool


class AccountingRepository(StoreBase):
    def record_checkpoints(self, job_id: str, seen: Sequence[CheckpointSeen]) -> None:
        """Store checkpoint observations, in one transaction, each against the attempt that
        was running at its time (the job's current attempt when none had started yet). The
        earliest time of each end wins (the log line and the file may both report a save),
        so a restarted service re-reading its logs from the start changes nothing."""
        if not seen:
            return
        with self._write(f"checkpoints of {job_id}") as conn:
            current = conn.execute(
                sa.select(schema.jobs.c.attempt).where(schema.jobs.c.job_id == job_id)
            ).scalar_one_or_none()
            if current is None:
                raise NotFound(f"unknown job {job_id!r}")
            starts = conn.execute(
                sa.select(schema.attempts.c.attempt, schema.attempts.c.started_at).where(
                    schema.attempts.c.job_id == job_id
                )
            ).all()
            for obs in seen:
                attempt = max((a for a, started in starts if started <= obs.time), default=current)
                column = "begun_at" if obs.begun else "saved_at"
                key = (
                    (_checkpoints.c.job_id == job_id)
                    & (_checkpoints.c.attempt == attempt)
                    & (_checkpoints.c.iteration == obs.iteration)
                )
                current = conn.execute(sa.select(_checkpoints.c[column]).where(key)).first()
                if current is None:
                    conn.execute(
                        sa.insert(_checkpoints).values(
                            job_id=job_id,
                            attempt=attempt,
                            iteration=obs.iteration,
                            **{column: obs.time},
                        )
                    )
                elif current[0] is None or obs.time < current[0]:
                    conn.execute(sa.update(_checkpoints).where(key).values(**{column: obs.time}))

    def list_checkpoints(self, job_id: str | None = None) -> list[CheckpointRecord]:
        query = sa.select(_checkpoints).order_by(
            _checkpoints.c.job_id, _checkpoints.c.attempt, _checkpoints.c.iteration
        )
        if job_id is not None:
            query = query.where(_checkpoints.c.job_id == job_id)
        with self._read("list checkpoints") as conn:
            return [
                CheckpointRecord(
                    r["job_id"], r["attempt"], r["iteration"], r["begun_at"], r["saved_at"]
                )
                for r in conn.execute(query).mappings()
            ]

    def add_feedback(
        self,
        advice_id: int,
        *,
        agree: bool,
        action_taken: str,
        now: float,
        note: str = "",
        by: str = "",
    ) -> FeedbackRecord:
        """Record an operator's answer (every answer is kept; the latest one counts)."""
        with self._write(f"feedback on advice {advice_id}") as conn:
            known = conn.execute(
                sa.select(sa.func.count()).where(schema.advice.c.id == advice_id)
            ).scalar_one()
            if not known:
                raise NotFound(f"unknown advice {advice_id}")
            new_id = conn.execute(
                sa.insert(_feedback)
                .values(
                    advice_id=advice_id,
                    time=now,
                    agree=agree,
                    action_taken=action_taken,
                    note=note,
                    by=by,
                )
                .returning(_feedback.c.id)
            ).scalar_one()
            row = conn.execute(sa.select(_feedback).where(_feedback.c.id == new_id)).mappings()
            return _feedback_from_row(row.one())

    def list_feedback(self, advice_id: int | None = None) -> list[FeedbackRecord]:
        """Oldest first."""
        query = sa.select(_feedback).order_by(_feedback.c.time, _feedback.c.id)
        if advice_id is not None:
            query = query.where(_feedback.c.advice_id == advice_id)
        with self._read("list feedback") as conn:
            return [_feedback_from_row(r) for r in conn.execute(query).mappings()]


def _feedback_from_row(row: sa.RowMapping) -> FeedbackRecord:
    return FeedbackRecord(
        id=row["id"],
        advice_id=row["advice_id"],
        time=row["time"],
        agree=bool(row["agree"]),
        action_taken=row["action_taken"],
        note=row["note"],
        by=row["by"],
    )
