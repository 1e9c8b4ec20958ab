"""Verdicts without a primary error (pure): only cascades (timeouts, refused connections, a
scheduler's cancellation) or only teardown noise. The mechanisms that explain them come first
(a kill from outside, a setup divergence, a solo phase, what the ranks say about their
collectives); what is left is a low-confidence hang or crash of unknown cause (network when a
cascade is itself a network error)."""

from __future__ import annotations

from collections.abc import Sequence

from trainmedic.core.attribute.collective import (
    collective_finding,
    in_rl_framework_workers,
    timeouts_alone,
)
from trainmedic.core.attribute.culprit import find_culprit, first_real_failure
from trainmedic.core.attribute.facts import JobFacts
from trainmedic.core.attribute.phase import (
    PhaseFinding,
    comm_init_failed,
    died_in_nccl_setup,
    killed_first,
    setup_divergence,
    solo_phase,
)
from trainmedic.core.attribute.verdict_build import (
    TIMEOUT,
    from_finding,
    from_root,
    implicated_by,
    noise,
)
from trainmedic.core.logparse.elastic import SIGABRT_EXITS
from trainmedic.core.model import Category, Event, Kind, Role, Verdict


def cascade_only(
    cascades: Sequence[Event],
    events: Sequence[Event],
    facts: JobFacts,
    hw_context: Sequence[Event] = (),
) -> Verdict:
    timeouts = [e for e in cascades if TIMEOUT.search(e.text)]
    finding = (
        killed_first(
            facts.child_failures,
            [e for e in events if e.role is Role.TEARDOWN],
            facts.kernel_logs,
        )
        # an RL framework sets its workers up itself: its stalls are read below (timeouts_alone)
        or (
            None
            if in_rl_framework_workers(timeouts)
            else setup_divergence(timeouts, facts.progress)
        )
        or solo_phase(facts.progress)
        or comm_init_failed(cascades, facts.neighbours, facts.progress)
    )
    if finding is not None:
        return from_finding(finding, events, facts, timeouts)
    if hw_context:
        # The kernel saw hardware trouble while every rank only timed out: the likelier story.
        return from_root(hw_context[0], events, facts, confidence_cap=0.4)
    network = [e for e in cascades if e.category is Category.NETWORK_HARDWARE]
    if not network:
        finding = _collective(timeouts, events, facts) or timeouts_alone(cascades)
        if finding is not None:
            return from_finding(finding, events, facts, timeouts, layer="mechanism (collective)")
    if all(e.category is Category.SCHEDULER for e in cascades):
        return _scheduler_only(cascades, events, facts)
    culprit = find_culprit(None, timeouts, facts.child_failures, facts.ranks_seen)
    kind = Kind.HANG if any(e.kind is Kind.HANG for e in cascades) else Kind.CRASH
    category = Category.NETWORK_HARDWARE if network else Category.UNKNOWN
    first = network[0] if network else cascades[0]
    return Verdict(
        failure=True,
        kind=kind,
        category=category,
        confidence=0.45 if network else 0.4,
        root_cause=first,
        implicated=implicated_by(first if network else None, events, culprit),
        cascades=noise(events, first),
        basis=f"catalogue: only cascades ({first.signature} first), no primary error; "
        f"culprit: {culprit.basis}",
    )


def _scheduler_only(cascades: Sequence[Event], events: Sequence[Event], facts: JobFacts) -> Verdict:
    """Only the scheduler's own cancellation lines (a step cancelled, no reason given) and no
    error of the job: the scheduler (or its user) ended it."""
    culprit = find_culprit(None, (), facts.child_failures, facts.ranks_seen)
    first = cascades[0]
    return Verdict(
        failure=True,
        kind=Kind.CRASH,
        category=Category.SCHEDULER,
        confidence=0.45,
        root_cause=first,
        implicated=implicated_by(None, events, culprit),
        cascades=noise(events, first),
        basis=f"mechanism: only the scheduler's cancellation ({first.signature} at "
        f"{first.source or 'line'}:{first.line}) and no error of the job: the scheduler or "
        f"its user ended it; culprit: {culprit.basis}",
    )


def _collective(
    timeouts: Sequence[Event], events: Sequence[Event], facts: JobFacts
) -> PhaseFinding | None:
    """What the ranks say about the collectives that timed out (``collective.py``); the work
    descriptor a wrapped timeout line printed below it counts with the timeout."""
    if not timeouts:
        return None
    works = [e for e in events if e.role is Role.CONTEXT and "OpType=" in e.text]
    return collective_finding(
        [*timeouts, *works], facts.collectives, facts.timelines, facts.progress
    )


def teardown_only(teardown: Sequence[Event], events: Sequence[Event], facts: JobFacts) -> Verdict:
    finding = killed_first(facts.child_failures, teardown, facts.kernel_logs) or solo_phase(
        facts.progress
    )
    if finding is not None:
        return from_finding(finding, events, facts, ())
    # The watchdog's own frames (checkTimeout, ncclCommWatchdog) are a timeout without its line.
    watchdog = [e for e in teardown if TIMEOUT.search(e.text)]
    finding = _collective(watchdog, events, facts)
    if finding is not None:
        return from_finding(finding, events, facts, watchdog, layer="mechanism (collective)")
    benches = [t.bench_rows for t in facts.timelines if t.bench_started]
    finding = None if watchdog else died_in_nccl_setup(facts.progress, max(benches, default=None))
    if finding is not None:
        return from_finding(finding, events, facts, ())
    culprit = find_culprit(None, (), facts.child_failures, facts.ranks_seen)
    first = first_real_failure(facts.child_failures)
    # torch's NCCL watchdog ends a timed-out collective with abort(): a lone SIGABRT is a hang.
    aborted = first is not None and first.exitcode in SIGABRT_EXITS
    return Verdict(
        failure=True,
        kind=Kind.HANG if aborted else Kind.CRASH,
        category=Category.UNKNOWN,
        confidence=0.25,
        root_cause=teardown[0] if teardown else None,
        implicated=implicated_by(None, events, culprit),
        cascades=noise(events, None),
        basis=f"catalogue: only teardown noise, no error line; culprit: {culprit.basis}",
    )
