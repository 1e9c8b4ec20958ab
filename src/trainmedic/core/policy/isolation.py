"""Which implicated nodes to exclude from the restart and which to drain.

Rules, in order:

* exclusion stays minimal and feasible: only implicated nodes the failing attempt ran on, and
  no more of them than there are healthy spares to replace them, so the job can still be
  scheduled (the ones left in are named in the basis);
* trust (``trust.py``): a node implicated only by the job's own output (attribution implicates
  only nodes a line names) may be excluded from that job, but is never drained and never
  counts as a repeat offender, whatever its history;
* drain needs strong evidence from a system source (kernel log, GPU telemetry, scheduler),
  or a repeat offender (a node the cluster's own evidence implicated in
  ``policy.repeat_offender_count`` incidents across attempts and jobs, this one included);
* circuit breaker (``breaker.py``): at most ``floor(max_drain_fraction x cluster_size)``
  drains per window, cluster-wide; past it the breaker trips and every drain is advice only
  (excluded, not drained) until an operator resets it.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.core.model import Event, Verdict
from trainmedic.core.policy.breaker import gate_drains
from trainmedic.core.policy.context import PolicyContext
from trainmedic.core.policy.trust import cluster_evidence, drain_evidence


@dataclass(frozen=True, slots=True)
class Isolation:
    exclude: tuple[str, ...]
    drain: tuple[str, ...]
    notes: tuple[str, ...]
    breaker_trip: bool = False  # drains were held back: the circuit breaker trips


def system_evidence(verdict: Verdict, node: str) -> Event | None:
    """A strong event from a system source that names ``node`` (or the only implicated one)."""
    return drain_evidence(verdict, PolicyContext(job_id=""), node)


def choose_isolation(
    verdict: Verdict,
    context: PolicyContext,
    *,
    may_drain: bool,
    offenders_only: bool = False,
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
    corroborated = {n for n in candidates if cluster_evidence(verdict, context, n) is not None}

    def incidents(node: str) -> int:
        """This one included only when the cluster's own evidence implicates the node."""
        return context.node_history.get(node, 0) + (1 if node in corroborated else 0)

    if offenders_only:
        first_time = [n for n in candidates if incidents(n) < cfg.repeat_offender_count]
        if first_time:
            notes.append(f"{', '.join(first_time)} implicated for the first time: kept in")
        candidates = [n for n in candidates if n not in first_time]
    # Strongest case first: system evidence, then the longest record.
    candidates.sort(
        key=lambda n: (
            drain_evidence(verdict, context, n) is None,
            n not in corroborated,
            -context.node_history.get(n, 0),
        )
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
        event = drain_evidence(verdict, context, node)
        if event is not None:
            notes.append(f"drain {node}: strong {event.evidence.value} evidence {event.signature}")
            drain.append(node)
        elif node not in corroborated:
            notes.append(
                f"{node} not drained: no strong system-source evidence, only the job's own "
                "output (which never drains a node nor counts in its history)"
            )
        elif (count := incidents(node)) >= cfg.repeat_offender_count:
            notes.append(f"drain {node}: repeat offender, implicated in {count} incidents")
            drain.append(node)
        else:
            notes.append(f"{node} not drained: no strong system-source evidence")
    if drain and not cfg.drain_enabled:
        notes.append(f"draining disabled by config: {', '.join(drain)} only excluded")
        drain = []
    gate = gate_drains(tuple(drain), context)
    if gate.note:
        notes.append(gate.note)
    return Isolation(tuple(exclude), gate.drain, tuple(notes), gate.trips)
