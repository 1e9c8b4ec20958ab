"""The drain circuit breaker (after NVSentinel's fault-quarantine breaker).

A burst of failures across many nodes is more likely a shared cause (a bad driver roll-out,
a switch, a storage outage, a log line every rank prints) than many broken nodes at once.
So trainmedic drains at most ``floor(policy.max_drain_fraction x cluster nodes)`` nodes per
``policy.drain_window_s``, counted cluster-wide over every drain it advised (every job, both
modes, including earlier decisions of the same cycle). The first drain past the limit
*trips* the breaker: from then on every drain is advice only (the node is excluded from the
job, never drained), whatever the window says, until an operator resets it
(``POST /breaker/reset``, ``trainmedic breaker reset``); the count then starts afresh. The
tripped state is stored, so a restarted service keeps it.

Only the operator's ``[policy]`` sets the limits; a job cannot override them
(``core.policy.overrides``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainmedic.core.policy.context import PolicyContext

RESET_HINT = "an operator resets it: POST /breaker/reset or `trainmedic breaker reset`"


@dataclass(frozen=True, slots=True)
class BreakerGate:
    """Which of the wanted drains may go ahead."""

    drain: tuple[str, ...]
    held: tuple[str, ...]  # excluded only
    trips: bool  # the breaker trips with this decision
    note: str = ""


def drain_limit(context: PolicyContext) -> int | None:
    """Nodes that may still be drained in this window; None: no cluster (nothing to break)."""
    if context.cluster_size is None:
        return None
    cfg = context.config
    return max(0, math.floor(cfg.max_drain_fraction * context.cluster_size) - context.recent_drains)


def gate_drains(wanted: tuple[str, ...], context: PolicyContext) -> BreakerGate:
    if not wanted:
        return BreakerGate((), (), trips=False)
    names = ", ".join(wanted)
    if context.breaker_tripped:
        return BreakerGate(
            (),
            wanted,
            trips=False,
            note=f"drain circuit breaker tripped: {names} excluded only, drains are advice "
            f"only until {RESET_HINT}",
        )
    limit = drain_limit(context)
    if limit is None or len(wanted) <= limit:
        return BreakerGate(wanted, (), trips=False)
    if context.cluster_size == 0:
        # The scheduler's node list is unknown this cycle (a failed poll): hold, do not trip.
        return BreakerGate(
            (), wanted, trips=False, note=f"cluster size unknown: {names} excluded only"
        )
    cfg = context.config
    drain, held = wanted[:limit], wanted[limit:]
    return BreakerGate(
        drain,
        held,
        trips=True,
        note=f"drain circuit breaker trips: {context.recent_drains} drain(s) in the last "
        f"{cfg.drain_window_s:g} s, at most {cfg.max_drain_fraction:.0%} of "
        f"{context.cluster_size} nodes: {', '.join(held)} excluded only; further drains are "
        f"advice only until {RESET_HINT}",
    )
