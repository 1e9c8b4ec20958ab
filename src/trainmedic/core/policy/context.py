"""Everything the policy needs to know besides the verdict, as frozen values.

The engine builds a :class:`PolicyContext` from its store at decision time; ``decide`` reads
it and nothing else (no clock, no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from trainmedic.core.model import Category, Event, Verdict
from trainmedic.core.policy.config import PolicyConfig

_EMPTY: Mapping[str, int] = MappingProxyType({})
_EMPTY_BUDGET: Mapping[Category, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One earlier failed attempt of the same job."""

    attempt: int
    category: Category
    signature: str | None  # the verdict's root-cause signature id
    iteration: int | None  # the last iteration reached when it failed
    nodes: tuple[str, ...]  # the nodes it ran on
    new_checkpoint: bool = False  # a newer checkpoint appeared during that attempt

    @classmethod
    def from_verdict(
        cls,
        attempt: int,
        verdict: Verdict,
        *,
        iteration: int | None,
        nodes: tuple[str, ...],
        new_checkpoint: bool,
    ) -> AttemptRecord:
        """The record the engine keeps of a failed attempt, for the next decision."""
        return cls(
            attempt=attempt,
            category=verdict.category,
            signature=verdict.root_cause.signature if verdict.root_cause else None,
            iteration=iteration,
            nodes=nodes,
            new_checkpoint=new_checkpoint,
        )


@dataclass(frozen=True, slots=True)
class PolicyContext:
    job_id: str
    attempts: tuple[AttemptRecord, ...] = ()  # earlier failures, oldest first; not this one
    iteration: int | None = None  # the last iteration the failing attempt reached
    # Iterations one progress report of the job moves on (the most among its recent ones);
    # None: not known. Two failure points this close are the same iteration (iteration_match).
    report_interval_steps: int | None = None
    # Since the previous failure (or the start, for a first failure):
    new_checkpoint: bool = False  # a newer checkpoint appeared
    progressed_iterations: int = 0  # iterations beyond the previous failure's iteration
    budget_used: Mapping[Category, int] = field(default_factory=lambda: _EMPTY_BUDGET)
    # Per node: incidents it was implicated in before this one, across attempts and jobs,
    # within policy.repeat_offender_window_s.
    node_history: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    current_nodes: tuple[str, ...] = ()  # the nodes the failing attempt ran on
    healthy_spares: tuple[str, ...] = ()  # idle, healthy, undrained nodes not in current_nodes
    # Nodes in the cluster (the circuit breaker's denominator); None: no cluster is known
    # (``analyze`` reading a finished job's files), so there is nothing to break.
    cluster_size: int | None = 0
    # Nodes trainmedic advised draining within policy.drain_window_s (and since the drain
    # circuit breaker was last reset), cluster-wide, every job and mode; see core.policy.breaker.
    recent_drains: int = 0
    breaker_tripped: bool = False  # the drain circuit breaker is open: drains are advice only
    # The finding's system-source events (node kernel log, telemetry, scheduler), beyond the
    # verdict's root cause and cascades: the cluster's own word about a node (core.policy.trust).
    system_events: tuple[Event, ...] = ()
    config: PolicyConfig = field(default_factory=PolicyConfig)  # the job's [policy]
    # The application error's confirmation retry runs on other nodes when spares allow.
    confirm_on_other_nodes: bool = True
    # A straggler's slow node is excluded by a restart (otherwise it is only reported).
    restart_on_straggler: bool = False
    # A first application error gets a confirmation retry (the service). ``analyze`` reads
    # a log after the fact, with no later attempt to watch: a confident verdict stops there.
    confirm_application_errors: bool = True

    @classmethod
    def offline(cls, job_id: str = "") -> PolicyContext:
        """What ``analyze`` knows besides the verdict: nothing of the job's history or the
        cluster; stop advice is meant to be acted on."""
        return cls(
            job_id=job_id,
            cluster_size=None,
            config=PolicyConfig(stop_enforcement=True),
            confirm_on_other_nodes=False,
            confirm_application_errors=False,
        )

    @property
    def progressed(self) -> bool:
        """Progress since the previous failure: such a failure spends no retry budget."""
        return self.new_checkpoint or self.progressed_iterations > 0
