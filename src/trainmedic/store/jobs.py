"""Jobs and their attempts."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa

from trainmedic.core.states import JobState
from trainmedic.store import schema
from trainmedic.store.base import DuplicateKey, NotFound, StoreBase
from trainmedic.store.codec import attempt_from_row, job_from_row, spec_to_dict
from trainmedic.store.records import AttemptRecord, JobRecord, JobSpec, ProgressWrite

_jobs = schema.jobs
_attempts = schema.attempts
# Statements built once (their cache key is memoised on the object): the per-job ones run
# for every job that comes and goes.
_JOB_BY_ID = sa.select(_jobs).where(_jobs.c.job_id == sa.bindparam("b_job"))


class JobsRepository(StoreBase):
    def register_job(
        self,
        job_id: str,
        scheduler: str,
        *,
        now: float,
        name: str = "",
        spec: JobSpec | None = None,
    ) -> JobRecord:
        """Start watching a job, or update its name/scheduler/spec when already registered.

        ``registered_at``, state, attempt and progress of a known job are kept: registering
        twice (a service restarted, a client retrying) changes nothing else.
        """
        return self.register_job_created(job_id, scheduler, now=now, name=name, spec=spec)[0]

    def register_job_created(
        self,
        job_id: str,
        scheduler: str,
        *,
        now: float,
        name: str = "",
        spec: JobSpec | None = None,
    ) -> tuple[JobRecord, bool]:
        """``register_job``, and whether this call created the job (a job new to the store
        has no attempts or history yet: the service need not ask for them). One
        transaction: the stored row is read back in it."""
        values = {
            "scheduler": scheduler,
            "name": name,
            "spec": spec_to_dict(spec or JobSpec()),
        }
        for _ in range(3):
            try:
                with self._write(f"register job {job_id}") as conn:
                    updated = conn.execute(
                        sa.update(_jobs).where(_jobs.c.job_id == job_id).values(**values)
                    ).rowcount
                    if not updated:
                        conn.execute(
                            sa.insert(_jobs).values(job_id=job_id, registered_at=now, **values)
                        )
                    row = conn.execute(_JOB_BY_ID, {"b_job": job_id}).mappings().first()
                if row is None:
                    break
                return job_from_row(row), not updated
            except DuplicateKey:
                continue  # registered concurrently: the next round updates it
        job = self.get_job(job_id)
        if job is None:
            raise NotFound(f"job {job_id!r} vanished while being registered")
        return job, False

    def get_job(self, job_id: str) -> JobRecord | None:
        with self._read(f"get job {job_id}") as conn:
            row = conn.execute(sa.select(_jobs).where(_jobs.c.job_id == job_id)).mappings().first()
        return job_from_row(row) if row else None

    def list_jobs(self) -> list[JobRecord]:
        with self._read("list jobs") as conn:
            rows = conn.execute(sa.select(_jobs).order_by(_jobs.c.registered_at)).mappings()
            return [job_from_row(r) for r in rows]

    def list_live_jobs(self, watched: Collection[str] = ()) -> list[JobRecord]:
        """``list_jobs`` less the jobs stored as ended that are not in ``watched``: every
        job still to watch (a new registration included) and the watched ones, whatever
        their state. What the service reads each cycle: a table that keeps every job ever
        registered grows all the time, this stays the size of what is watched."""
        ended = sorted(state.value for state in JobState if state.is_terminal())
        live = sa.select(_jobs).where(_jobs.c.state.not_in(ended))
        found: dict[str, Any] = {}
        with self._read("list live jobs") as conn:
            for row in conn.execute(live).mappings():
                found[row["job_id"]] = row
            rest = sorted(job_id for job_id in watched if job_id not in found)
            for first in range(0, len(rest), 500):  # SQLite caps the bound parameters
                chunk = rest[first : first + 500]
                query = sa.select(_jobs).where(_jobs.c.job_id.in_(chunk))
                for row in conn.execute(query).mappings():
                    found[row["job_id"]] = row
        # In registration order, as list_jobs.
        rows = sorted(found.values(), key=lambda r: r["registered_at"])
        return [job_from_row(r) for r in rows]

    def update_job_progress(
        self,
        job_id: str,
        *,
        state: str | None = None,
        attempt: int | None = None,
        progress_at: float | None = None,
        iteration: int | None = None,
        checkpoint_iteration: int | None = None,
        checkpoint_at: float | None = None,
    ) -> None:
        """Update what is given (None leaves a field alone).

        ``progress_at`` + ``iteration`` also update the job's current attempt row (its first
        and last progress), which the goodput metric reads. The service should batch progress
        (one call per job per poll), not write once per training step.
        """
        values: dict[str, Any] = {}
        if state is not None:
            values["state"] = state
        if attempt is not None:
            values["attempt"] = attempt
        if progress_at is not None:
            values["last_progress_at"] = progress_at
        if iteration is not None:
            values["last_iteration"] = iteration
        if checkpoint_iteration is not None:
            values["last_checkpoint_iteration"] = checkpoint_iteration
        if checkpoint_at is not None:
            values["last_checkpoint_at"] = checkpoint_at
        with self._write(f"update job {job_id}") as conn:
            if values:
                updated = conn.execute(
                    sa.update(_jobs).where(_jobs.c.job_id == job_id).values(**values)
                ).rowcount
            else:
                updated = conn.execute(
                    sa.select(sa.func.count()).where(_jobs.c.job_id == job_id)
                ).scalar_one()
            if not updated:
                raise NotFound(f"unknown job {job_id!r}")
            if progress_at is not None and iteration is not None:
                current = conn.execute(
                    sa.select(_jobs.c.attempt).where(_jobs.c.job_id == job_id)
                ).scalar_one()
                self._attempt_progress(conn, job_id, current, progress_at, iteration)

    def record_progress(self, writes: Sequence[ProgressWrite]) -> None:
        """A cycle's progress and checkpoints of every job, in one transaction and in the
        order given (a job's first step of an attempt before its latest): what the same
        ``update_job_progress`` calls would store, at the cost of a few statements whatever
        the number of jobs. An unknown job is ``NotFound`` and nothing is stored."""
        if not writes:
            return
        ids = sorted({w.job_id for w in writes})
        with self._write(f"progress of {len(ids)} jobs") as conn:
            known: set[str] = set()
            for first in range(0, len(ids), 500):  # SQLite caps the bound parameters
                chunk = ids[first : first + 500]
                known.update(
                    conn.execute(sa.select(_jobs.c.job_id).where(_jobs.c.job_id.in_(chunk)))
                    .scalars()
                    .all()
                )
            missing = [job_id for job_id in ids if job_id not in known]
            if missing:
                raise NotFound(f"unknown job {missing[0]!r}")
            steps = [
                {"b_job": w.job_id, "b_at": w.progress_at, "b_iter": w.iteration}
                for w in writes
                if w.progress_at is not None and w.iteration is not None
            ]
            saves = [
                {"b_job": w.job_id, "b_ckpt": w.checkpoint_iteration, "b_ckpt_at": w.checkpoint_at}
                for w in writes
                if w.checkpoint_iteration is not None and w.checkpoint_at is not None
            ]
            job: sa.BindParameter[str] = sa.bindparam("b_job")
            if saves:
                conn.execute(
                    sa.update(_jobs)
                    .where(_jobs.c.job_id == job)
                    .values(
                        last_checkpoint_iteration=sa.bindparam("b_ckpt"),
                        last_checkpoint_at=sa.bindparam("b_ckpt_at"),
                    ),
                    saves,
                )
            if steps:
                at: sa.BindParameter[float] = sa.bindparam("b_at")
                iteration: sa.BindParameter[int] = sa.bindparam("b_iter")
                conn.execute(
                    sa.update(_jobs)
                    .where(_jobs.c.job_id == job)
                    .values(last_progress_at=at, last_iteration=iteration),
                    steps,
                )
                current = sa.select(_jobs.c.attempt).where(_jobs.c.job_id == job)
                conn.execute(
                    sa.update(_attempts)
                    .where(
                        (_attempts.c.job_id == job)
                        & (_attempts.c.attempt == current.scalar_subquery())
                    )
                    .values(
                        first_progress_at=sa.func.coalesce(_attempts.c.first_progress_at, at),
                        first_iteration=sa.func.coalesce(_attempts.c.first_iteration, iteration),
                        last_progress_at=at,
                        last_iteration=iteration,
                    ),
                    steps,
                )

    @staticmethod
    def _attempt_progress(
        conn: sa.Connection, job_id: str, attempt: int, at: float, iteration: int
    ) -> None:
        key = (_attempts.c.job_id == job_id) & (_attempts.c.attempt == attempt)
        conn.execute(
            sa.update(_attempts)
            .where(key)
            .values(
                first_progress_at=sa.func.coalesce(_attempts.c.first_progress_at, at),
                first_iteration=sa.func.coalesce(_attempts.c.first_iteration, iteration),
                last_progress_at=at,
                last_iteration=iteration,
            )
        )

    def record_attempt_start(
        self, job_id: str, attempt: int, *, started_at: float, nodes: Sequence[str] = ()
    ) -> AttemptRecord:
        """Idempotent: a known (job, attempt) keeps its first start time and nodes, unless it
        had none. Also makes ``attempt`` the job's current attempt when it is newer."""
        with self._write(f"start attempt {job_id}/{attempt}") as conn:
            start_attempt_in(conn, job_id, attempt, started_at, nodes)
            row = conn.execute(_ATTEMPT_ROW, {"b_job": job_id, "b_attempt": attempt})
            return attempt_from_row(row.mappings().one())

    def record_attempt_end(
        self, job_id: str, attempt: int, *, ended_at: float, end_state: str
    ) -> None:
        """The first end recorded wins, so re-observing a finished attempt changes nothing."""
        with self._write(f"end attempt {job_id}/{attempt}") as conn:
            if not end_attempt_in(conn, job_id, attempt, ended_at, end_state):
                raise NotFound(f"unknown attempt {job_id!r}/{attempt}")

    def list_attempts(self, job_id: str | None = None) -> list[AttemptRecord]:
        query = sa.select(_attempts).order_by(_attempts.c.job_id, _attempts.c.attempt)
        if job_id is not None:
            query = query.where(_attempts.c.job_id == job_id)
        with self._read("list attempts") as conn:
            return [attempt_from_row(r) for r in conn.execute(query).mappings()]


_ATTEMPT_KEY = (_attempts.c.job_id == sa.bindparam("b_job")) & (
    _attempts.c.attempt == sa.bindparam("b_attempt")
)
_JOB_COUNT = sa.select(sa.func.count()).where(_jobs.c.job_id == sa.bindparam("b_job"))
_ATTEMPT_NODES = sa.select(_attempts.c.nodes).where(_ATTEMPT_KEY)
_ATTEMPT_ROW = sa.select(_attempts).where(_ATTEMPT_KEY)
_ATTEMPT_COUNT = sa.select(sa.func.count()).where(_ATTEMPT_KEY)
_INSERT_ATTEMPT = sa.insert(_attempts).values(
    job_id=sa.bindparam("b_job"),
    attempt=sa.bindparam("b_attempt"),
    started_at=sa.bindparam("b_at"),
    nodes=sa.bindparam("b_nodes"),
)
_SET_ATTEMPT_NODES = sa.update(_attempts).where(_ATTEMPT_KEY).values(nodes=sa.bindparam("b_nodes"))
_RAISE_JOB_ATTEMPT = (
    sa.update(_jobs)
    .where(
        (_jobs.c.job_id == sa.bindparam("b_job")) & (_jobs.c.attempt < sa.bindparam("b_attempt"))
    )
    .values(attempt=sa.bindparam("b_attempt"))
)
_END_ATTEMPT = (
    sa.update(_attempts)
    .where(_ATTEMPT_KEY & _attempts.c.ended_at.is_(None))
    .values(ended_at=sa.bindparam("b_at"), end_state=sa.bindparam("b_state"))
)


def start_attempt_in(
    conn: sa.Connection,
    job_id: str,
    attempt: int,
    started_at: float,
    nodes: Sequence[str],
    *,
    job_known: bool = False,
) -> None:
    """``record_attempt_start`` inside the caller's transaction. ``job_known``: the caller
    found the job in this transaction already (not asked again)."""
    key = {"b_job": job_id, "b_attempt": attempt}
    if not job_known and not conn.execute(_JOB_COUNT, key).scalar_one():
        raise NotFound(f"unknown job {job_id!r}")
    existing = conn.execute(_ATTEMPT_NODES, key).first()
    if existing is None:
        conn.execute(_INSERT_ATTEMPT, {**key, "b_at": started_at, "b_nodes": list(nodes)})
    elif nodes and not existing[0]:
        conn.execute(_SET_ATTEMPT_NODES, {**key, "b_nodes": list(nodes)})
    conn.execute(_RAISE_JOB_ATTEMPT, key)


def end_attempt_in(
    conn: sa.Connection, job_id: str, attempt: int, ended_at: float, end_state: str
) -> bool:
    """``record_attempt_end`` inside the caller's transaction; False: no such attempt."""
    key = {"b_job": job_id, "b_attempt": attempt}
    updated = conn.execute(_END_ATTEMPT, {**key, "b_at": ended_at, "b_state": end_state}).rowcount
    return bool(updated) or bool(conn.execute(_ATTEMPT_COUNT, key).scalar_one())
