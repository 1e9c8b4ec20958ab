"""Which implicated nodes to exclude from the restart and which to drain.

Rules, in order:

* exclusion stays minimal and feasible: only implicated nodes the failing attempt ran on, and
  no more of them than there are healthy spares to replace them, so the job can still be
  scheduled (the ones left in are named in the basis);
* drain needs strong evidence from a system source (kernel log, GPU telemetry, scheduler),
  never a line seen only in the job's own output, or a repeat offender (a node implicated in
  ``policy.repeat_offender_count`` incidents across attempts and jobs, this one included);
* circuit breaker: at most ``floor(max_drain_fraction x cluster_size)`` drains per window,
  counting the ``recent_drains`` made in ``drain_window_s``; beyond it a node is only excluded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainmedic.core.model import Event, Verdict
from trainmedic.core.policy.context import PolicyContext


@dataclass(frozen=True, slots=True)
class Isolation:
    exclude: tuple[str, ...]
    drain: tuple[str, ...]
    notes: tuple[str, ...]


def system_evidence(verdict: Verdict, node: str) -> Event | None:
    """A strong event from a system source that names ``node`` (or the only implicated one)."""
    events = ([verdict.root_cause] if verdict.root_cause else []) + list(verdict.cascades)
    only = verdict.implicated.nodes == (node,)
    for event in events:
        if event.justifies_drain() and (event.node == node or (event.node is None and only)):
            return event
    return None


def choose_isolation(
    verdict: Verdict, context: PolicyContext, *, may_drain: bool, offenders_only: bool = False
) -> Isolation:
    """Exclusion and drain lists with their reasons; ``offenders_only`` keeps only repeat
    offenders (for weak causes, where one incident does not justify moving the job)."""
    cfg = context.config
    notes: list[str] = []
    implicated = tuple(dict.fromkeys(verdict.implicated.nodes))
    if context.current_nodes:
        candidates = [n for n in implicated if n in context.current_nodes]
        ignored = [n for n in implicated if n not in context.current_nodes]
        if ignored:
            notes.append(f"{', '.join(ignored)} not in the job's nodes: not excluded")
    else:
        candidates = list(implicated)
    if offenders_only:
        first_time = [
            n for n in candidates if context.node_history.get(n, 0) + 1 < cfg.repeat_offender_count
        ]
        if first_time:
            notes.append(f"{', '.join(first_time)} implicated for the first time: kept in")
        candidates = [n for n in candidates if n not in first_time]
    # Strongest case first: system evidence, then the longest record.
    candidates.sort(
        key=lambda n: (system_evidence(verdict, n) is None, -context.node_history.get(n, 0))
    )
    exclude = candidates
    if context.current_nodes and len(candidates) > len(context.healthy_spares):
        exclude = candidates[: len(context.healthy_spares)]
        kept = candidates[len(exclude) :]
        notes.append(
            f"only {len(context.healthy_spares)} healthy spare(s): {', '.join(kept)} kept in "
            "so the job can still be scheduled"
        )
    drain: list[str] = []
    for node in exclude if may_drain else ():
        event = system_evidence(verdict, node)
        incidents = context.node_history.get(node, 0) + 1
        if event is not None:
            notes.append(f"drain {node}: strong {event.evidence.value} evidence {event.signature}")
            drain.append(node)
        elif incidents >= cfg.repeat_offender_count:
            notes.append(f"drain {node}: repeat offender, implicated in {incidents} incidents")
            drain.append(node)
        else:
            notes.append(f"{node} not drained: no strong system-source evidence (job output only)")
    if drain and not cfg.drain_enabled:
        notes.append(f"draining disabled by config: {', '.join(drain)} only excluded")
        drain = []
    if drain and context.cluster_size is not None:
        allowed = max(
            0, math.floor(cfg.max_drain_fraction * context.cluster_size) - context.recent_drains
        )
        if len(drain) > allowed:
            held = drain[allowed:]
            drain = drain[:allowed]
            notes.append(
                f"circuit breaker: {context.recent_drains} recent drain(s), at most "
                f"{cfg.max_drain_fraction:.0%} of {context.cluster_size} nodes: "
                f"{', '.join(held)} excluded only"
            )
    return Isolation(tuple(exclude), tuple(drain), tuple(notes))
