"""Holds (what the watchdog releases), node history (across attempts and jobs), and the drain
circuit breaker (its trips and resets, and the drains it counts)."""

from __future__ import annotations

import sqlalchemy as sa

from trainmedic.core.model import Category
from trainmedic.store import schema
from trainmedic.store.base import StoreBase
from trainmedic.store.codec import hold_from_row, node_event_from_row
from trainmedic.store.records import BreakerState, HoldRecord, NodeEvent

_holds = schema.holds
_history = schema.node_history
_breaker = schema.drain_breaker
_advice = schema.advice


class NodesRepository(StoreBase):
    def record_hold(self, job_id: str, *, held_at: float, by: str) -> HoldRecord:
        """Note that trainmedic holds a job. Idempotent: an open hold is returned as is."""
        with self._write(f"hold {job_id}") as conn:
            open_hold = (
                conn.execute(
                    sa.select(_holds).where(
                        (_holds.c.job_id == job_id) & _holds.c.released_at.is_(None)
                    )
                )
                .mappings()
                .first()
            )
            if open_hold is not None:
                return hold_from_row(open_hold)
            new_id = conn.execute(
                sa.insert(_holds)
                .values(job_id=job_id, held_at=held_at, by=by)
                .returning(_holds.c.id)
            ).scalar_one()
            row = conn.execute(sa.select(_holds).where(_holds.c.id == new_id)).mappings().one()
        return hold_from_row(row)

    def release_hold(self, job_id: str, *, released_at: float) -> int:
        """Close the job's open holds; returns how many were open (0: nothing to do)."""
        with self._write(f"release {job_id}") as conn:
            count: int = conn.execute(
                sa.update(_holds)
                .where((_holds.c.job_id == job_id) & _holds.c.released_at.is_(None))
                .values(released_at=released_at)
            ).rowcount
        return count

    def open_holds(self) -> list[HoldRecord]:
        return self.holds_older_than(float("inf"))

    def holds_older_than(self, t: float) -> list[HoldRecord]:
        """Open holds taken before ``t`` (the watchdog passes now - timeout)."""
        query = (
            sa.select(_holds)
            .where(_holds.c.released_at.is_(None) & (_holds.c.held_at < t))
            .order_by(_holds.c.held_at)
        )
        with self._read("list holds") as conn:
            return [hold_from_row(r) for r in conn.execute(query).mappings()]

    def record_node_event(
        self,
        node: str,
        *,
        time: float,
        job_id: str | None = None,
        incident_id: int | None = None,
        category: Category | None = None,
        strong: bool = False,
        drained: bool = False,
        reason: str = "",
    ) -> NodeEvent:
        """Append to a node's history (implicated in an incident, drained, ...)."""
        with self._write(f"node event {node}") as conn:
            new_id = conn.execute(
                sa.insert(_history)
                .values(
                    node=node,
                    time=time,
                    job_id=job_id,
                    incident_id=incident_id,
                    category=category.value if category else None,
                    strong=strong,
                    drained=drained,
                    reason=reason,
                )
                .returning(_history.c.id)
            ).scalar_one()
            row = conn.execute(sa.select(_history).where(_history.c.id == new_id)).mappings()
            return node_event_from_row(row.one())

    def node_history(self, node: str | None = None) -> list[NodeEvent]:
        """Oldest first; every node when ``node`` is None."""
        query = sa.select(_history).order_by(_history.c.time, _history.c.id)
        if node is not None:
            query = query.where(_history.c.node == node)
        with self._read("node history") as conn:
            return [node_event_from_row(r) for r in conn.execute(query).mappings()]

    # -- the drain circuit breaker (core.policy.breaker) ----------------------------------

    def breaker_state(self) -> BreakerState:
        with self._read("breaker state") as conn:
            return self._breaker_in(conn)

    @staticmethod
    def _breaker_in(conn: sa.Connection) -> BreakerState:
        open_trip = (
            conn.execute(
                sa.select(_breaker)
                .where(_breaker.c.reset_at.is_(None))
                .order_by(_breaker.c.tripped_at, _breaker.c.id)
                .limit(1)
            )
            .mappings()
            .first()
        )
        last_reset = (
            conn.execute(
                sa.select(_breaker.c.reset_at, _breaker.c.reset_by)
                .where(_breaker.c.reset_at.is_not(None))
                .order_by(_breaker.c.reset_at.desc(), _breaker.c.id.desc())
                .limit(1)
            )
            .mappings()
            .first()
        )
        return BreakerState(
            tripped=open_trip is not None,
            tripped_at=open_trip["tripped_at"] if open_trip else None,
            reason=open_trip["reason"] if open_trip else "",
            reset_at=last_reset["reset_at"] if last_reset else None,
            reset_by=last_reset["reset_by"] if last_reset else "",
        )

    def trip_breaker(self, *, now: float, reason: str) -> BreakerState:
        """Trip the breaker; idempotent: a tripped breaker keeps its first trip."""
        with self._write("trip the drain breaker") as conn:
            if not self._breaker_in(conn).tripped:
                conn.execute(sa.insert(_breaker).values(tripped_at=now, reason=reason[:2000]))
            return self._breaker_in(conn)

    def reset_breaker(self, *, now: float, by: str) -> tuple[bool, BreakerState]:
        """An operator's reset: (whether it was tripped, the state now). Drains advised before
        the reset no longer count towards the limit. Resetting a closed breaker changes
        nothing."""
        with self._write("reset the drain breaker") as conn:
            was = self._breaker_in(conn).tripped
            if was:
                conn.execute(
                    sa.update(_breaker)
                    .where(_breaker.c.reset_at.is_(None))
                    .values(reset_at=now, reset_by=by[:128])
                )
            return was, self._breaker_in(conn)

    def advised_drains(self, since: float) -> int:
        """Distinct nodes that advice created at or after ``since`` drains, every job and
        mode (the breaker's count: advice is counted when decided, not when carried out, so
        decisions of one cycle count each other's drains)."""
        query = sa.select(_advice.c.drain_nodes).where(_advice.c.created_at >= since)
        with self._read("advised drains") as conn:
            nodes = {
                str(node)
                for (drained,) in conn.execute(query)
                for node in (drained or ())
                if isinstance(drained, list)
            }
        return len(nodes)
