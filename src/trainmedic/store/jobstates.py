"""What one scheduler poll changed of the watched jobs, stored in one transaction.

A poll of 1,000 jobs coming and going changes tens of them (an attempt ends, the job's state
moves, a new attempt starts on its nodes): each change stored in a transaction of its own
cost more than everything else the cycle stores.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from trainmedic.store import schema
from trainmedic.store.base import NotFound, StoreBase
from trainmedic.store.jobs import end_attempt_in, start_attempt_in
from trainmedic.store.records import JobStateChange

_jobs = schema.jobs
_JOB = _jobs.c.job_id == sa.bindparam("b_job")
# Built once (the cache key is memoised on the statement): run for every change.
_SET_STATE = (
    sa.update(_jobs)
    .where(_JOB)
    .values(state=sa.bindparam("b_state"), attempt=sa.bindparam("b_attempt"))
)
# Nothing to set; the update still says whether the job exists.
_TOUCH = sa.update(_jobs).where(_JOB).values(job_id=sa.bindparam("b_job"))


class JobStatesRepository(StoreBase):
    def record_job_states(self, changes: Sequence[JobStateChange]) -> None:
        """Per change, in order: end the attempt that stopped (one never recorded is left
        alone), set the job's state and attempt, record the new attempt's start; what the
        ``record_attempt_end``, ``update_job_progress`` and ``record_attempt_start`` calls
        would store, all or nothing. An unknown job is ``NotFound``."""
        if not changes:
            return
        with self._write(f"state of {len(changes)} jobs") as conn:
            for change in changes:
                if change.ended is not None:
                    attempt, end_state = change.ended
                    end_attempt_in(conn, change.job_id, attempt, change.at, end_state)
                if change.state is not None:
                    values = {"b_job": change.job_id, "b_state": change.state}
                    found = conn.execute(_SET_STATE, {**values, "b_attempt": change.attempt})
                else:
                    found = conn.execute(_TOUCH, {"b_job": change.job_id})
                if not found.rowcount:
                    raise NotFound(f"unknown job {change.job_id!r}")
                if change.started:
                    start_attempt_in(
                        conn, change.job_id, change.attempt, change.at, change.nodes, job_known=True
                    )
