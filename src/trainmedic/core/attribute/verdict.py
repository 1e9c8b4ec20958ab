"""Attribution: from matched events and the job's facts to one verdict (pure).

Three layers, each saying in the verdict's basis what it rests on:

1. **catalogue** (precise): the root cause is the earliest ``primary`` event, with the
   corrections in ``root.py`` (detail lines, peer symptoms, kernel hardware evidence). An
   app-log error the job then trained past (``SURVIVED_REPORTS`` progress lines) is not a
   cause; an exception no signature knows, closing a traceback, is a low-confidence
   application cause. Context rules (``context_rules.toml``) refine its category. Without a
   primary, strong hardware context (Xid 45 "caused by previous Xid 149") still names the
   hardware.
2. **mechanisms**: where the job was when it failed (``phase.py``), what the ranks say about
   their collectives (``collective.py``: a desync against a peer that died or a fabric that
   stalled), the time structure (``timeline.py``: progress that stopped while the job still
   ran, a loss that diverged). Cascades with no mechanism give a low-confidence hang/crash of
   unknown cause (network when the cascade itself is a network error); teardown alone is
   unknown. The culprit rank comes from ``culprit.py``.
3. **evidence** (``evidence.py``): failure lines no signature knows still name a category,
   with a confidence of at most 0.45; they also name the category of a verdict the layers
   above left unknown. No failure only when there is no failure evidence at all.
4. **learned** (``learned.py``): a text classifier trained on the labelled real logs names an
   unknown failure that rests on unnamed failure lines or teardown alone (0.2-0.3, no node).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from trainmedic.core.attribute.agent_restart import agent_failed_to_restart
from trainmedic.core.attribute.bench_copies import benchmark_copies
from trainmedic.core.attribute.blocked import blocked_task, waiting_stack
from trainmedic.core.attribute.collective import nccl_trace_desync
from trainmedic.core.attribute.culprit import find_culprit, first_real_failure
from trainmedic.core.attribute.duplicate_ranks import ranks_claimed_twice
from trainmedic.core.attribute.evidence import EvidenceFinding, read_evidence
from trainmedic.core.attribute.facts import JobFacts
from trainmedic.core.attribute.graph_capture import capture_never_finished
from trainmedic.core.attribute.group_bandwidth import group_slower_than_its_part
from trainmedic.core.attribute.learned import learned_fallback
from trainmedic.core.attribute.local_launch import init_without_hostfile
from trainmedic.core.attribute.lock_wait import lock_wait_on_object_mount
from trainmedic.core.attribute.net_plugin import mixed_net_plugins
from trainmedic.core.attribute.overflow import scaler_diverged
from trainmedic.core.attribute.phase import (
    died_in_setup,
    silence_after_init,
    stuck_in_nccl_setup,
)
from trainmedic.core.attribute.recurring import recurring_context
from trainmedic.core.attribute.root import choose_root
from trainmedic.core.attribute.rules import refine_with_support
from trainmedic.core.attribute.stuck import (
    first_collective_never_returned,
    rendezvous_never_completed,
    stuck_in_stack_dump,
)
from trainmedic.core.attribute.timeline import loss_diverged, stalled_while_running
from trainmedic.core.attribute.unfinished import allocation_never_granted, traceback_cut
from trainmedic.core.attribute.untrained_links import untrained_link_reports
from trainmedic.core.attribute.verdict_build import from_finding, from_root, noise
from trainmedic.core.attribute.verdict_cascades import cascade_only, teardown_only
from trainmedic.core.attribute.version_ab import version_regression
from trainmedic.core.logparse.evidence import EvidenceLine
from trainmedic.core.model import (
    NO_FAILURE,
    Category,
    Event,
    EvidenceSource,
    Implicated,
    Kind,
    Role,
    Verdict,
)

SURVIVED_REPORTS = 20
"""An app-log error followed by this many progress lines in its file did not stop the job."""


def _survived(event: Event, progress_after: Mapping[Event, int]) -> bool:
    """Training went on after ``event`` (a warning-like error, a retried worker): not a cause.
    Kernel evidence never counts as survived: other ranks may print steps after a GPU dies."""
    if event.evidence is not EvidenceSource.APP_LOG or event.category.is_hardware():
        return False
    return progress_after.get(event, 0) >= SURVIVED_REPORTS


def _unsurvived_kernel_context(event: Event, facts: JobFacts) -> bool:
    """A lone corrected error from the kernel counts only if its file shows no training after it:
    a job that printed steps after one corrected ECC/PCIe record or a recorded row remap ran
    past what the hardware already handled (a stream of them is `recurring`'s to read)."""
    return event.evidence is EvidenceSource.KERNEL_LOG and not facts.progress_after.get(event, 0)


UNCAUGHT_CONFIDENCE = 0.45
"""Confidence of a verdict resting only on an exception no signature describes: below the
stop threshold, so the job is retried once and stopped by the retry budget if it repeats."""


def _uncaught_exceptions(events: Sequence[Event], facts: JobFacts) -> list[Event]:
    """Exception lines closing a traceback (application context of kind crash, frames in their
    neighbourhood) that are not a known cascade/teardown line and that training did not
    survive, earliest first."""
    explained = {(e.source, e.line) for e in events if e.role is not Role.CONTEXT}
    found = [
        e
        for e in events
        if e.role is Role.CONTEXT
        and e.category is Category.APPLICATION
        and e.kind is Kind.CRASH
        and (e.source, e.line) not in explained
        and _IN_TRACEBACK.search(facts.neighbours.get(e, ""))
        and not _survived(e, facts.progress_after)
    ]
    order = {id(e): i for i, e in enumerate(events)}
    found.sort(key=lambda e: order[id(e)])
    return found


_IN_TRACEBACK = re.compile(r'Traceback \(most recent call last\)|^\s*(?:\S+\s+)?File "', re.M)


def attribute(events: Sequence[Event], *, facts: JobFacts | None = None) -> Verdict:
    """One verdict for one job attempt (or one analysed input)."""
    facts = facts or JobFacts()
    verdict = _layers(events, facts)
    if verdict.failure and verdict.category is Category.UNKNOWN:
        verdict = _named_by_evidence(verdict, facts)
    # Layer 4, only where the others said nothing sure (unknown, no failure): a guess.
    return learned_fallback(verdict, facts.text) if facts.learned else verdict


def _layers(events: Sequence[Event], facts: JobFacts) -> Verdict:
    # NVLink reported down from link 0 up on a GPU: links that never came up (no bridge),
    # the node's inventory rather than a fault (``untrained_links.py``).
    untrained = untrained_link_reports(events)
    primaries = [
        e
        for e in events
        if e.role is Role.PRIMARY
        and id(e) not in untrained
        and not _survived(e, facts.progress_after)
    ]
    cascades = [e for e in events if e.role is Role.CASCADE]
    if primaries:
        return from_root(choose_root(primaries, events), events, facts)
    uncaught = _uncaught_exceptions(events, facts)
    if uncaught:
        # No catalogue entry knows the exception, but a traceback ended the job in its own
        # code: more likely the program than anything the cascades or teardown could say.
        return from_root(uncaught[0], events, facts, confidence_cap=UNCAUGHT_CONFIDENCE)
    # Hardware context with nothing else (e.g. only "Xid 45 caused by previous Xid 149"):
    # the kernel still says what broke, with less certainty.
    # Weak hardware context counts only from the kernel (corrected AER, MCE "events logged"),
    # or when it recurs (a stream of corrected errors on one node: a part wearing out).
    recurring = recurring_context(events)
    hw_context = [
        e
        for e in events
        if e.role is Role.CONTEXT
        and e.category.is_hardware()
        and (e.strong or id(e) in recurring or _unsurvived_kernel_context(e, facts))
    ]
    strong_context = [e for e in hw_context if e.strong]
    if strong_context:
        return from_root(strong_context[0], events, facts, confidence_cap=0.6)
    # The same run failing with one version of a component and passing with another: the
    # version is the variable shown, more telling than timeouts or unnamed failure lines.
    finding = version_regression(facts.text)
    if finding is not None:
        return from_finding(finding, events, facts, (), layer="mechanism (version)")
    # Hosts that loaded different NCCL network plugins: a stack on part of the nodes, which a
    # timeout among the cascades would only show as a wait.
    finding = mixed_net_plugins(facts.text, facts.timelines, facts.progress)
    if finding is not None:
        return from_finding(finding, events, facts, (), layer="mechanism (stack)")
    # The elastic agent failing while it re-formed the group after a worker's failure: its
    # rendezvous errors are cascades to the catalogue, but here they are the recovery failing.
    finding = agent_failed_to_restart(facts.text)
    if finding is not None:
        return from_finding(finding, events, facts, (), layer="mechanism (elastic restart)")
    if cascades:
        return cascade_only(cascades, events, facts, hw_context)
    if hw_context:
        first = hw_context[0]
        note = recurring.get(id(first), "")
        return from_root(first, events, facts, confidence_cap=0.4, note=note)
    finding = (
        loss_diverged(facts.timelines)
        or scaler_diverged(facts.timelines, events)
        or stalled_while_running(facts.timelines)
    )
    if finding is not None:
        return from_finding(finding, events, facts, (), layer="mechanism (time structure)")
    finding = stuck_in_stack_dump(facts.stack_dumps)
    if finding is not None:
        return from_finding(finding, events, facts, (), layer="mechanism (stack dump)")
    finding = blocked_task(events) or waiting_stack(events)
    if finding is not None:
        return from_finding(finding, events, facts, (), layer="mechanism (blocked task)")
    teardown = [e for e in events if e.role is Role.TEARDOWN]
    if _warned_at_exit(teardown, facts):
        teardown = []
    if teardown or first_real_failure(facts.child_failures) is not None:
        return teardown_only(teardown, events, facts)
    finding = nccl_trace_desync(facts.collectives)
    if finding is not None:
        return from_finding(finding, events, facts, (), layer="mechanism (collective)")
    # One global rank claimed by two processes, others by none: the launch gave every node
    # the same ranks (``duplicate_ranks.py``), which says more than where the log stopped.
    finding = ranks_claimed_twice(facts.text)
    if finding is not None:
        return from_finding(finding, events, facts, (), layer="mechanism (launch)")
    # NCCL saying it connected all rings/trees means its setup finished: not stuck inside it.
    connected = any(t.nccl_connected for t in facts.timelines)
    # Only NCCL's opening lines (version, environment, interface choice): a start, not a wait.
    opened = any(t.nccl_past_opening for t in facts.timelines)
    found = _read_evidence(events, facts)
    finding = (
        rendezvous_never_completed(facts.timelines, facts.progress)
        or died_in_setup(found, events, facts)
        or silence_after_init(facts.progress)
        or (None if connected or not opened else stuck_in_nccl_setup(facts.progress))
        or first_collective_never_returned(facts.timelines, facts.progress)
    )
    if finding is not None:
        return from_finding(finding, events, facts, ())
    if found is None:
        # No failure line at all, but a log that stops half-way through saying something
        # (``unfinished.py``); an earlier failure line would say more than where it stopped.
        # A local-only fallback launch before a cut in the group's set-up says why it failed.
        # A last wait for a file lock on a FUSE-mounted object store is where it hangs, and
        # an inference engine's graph capture the log ends inside is where its start-up did.
        finding = (
            init_without_hostfile(facts.text, facts.timelines)
            or traceback_cut(facts.timelines)
            or allocation_never_granted(facts.timelines, facts.progress)
            or lock_wait_on_object_mount(facts.text)
            or capture_never_finished(facts.text)
        )
        if finding is not None:
            return from_finding(finding, events, facts, (), layer="mechanism (unfinished)")
        finding = benchmark_copies(facts.timelines) or group_slower_than_its_part(facts.text)
        if finding is not None:
            return from_finding(finding, events, facts, (), layer="mechanism (benchmark)")
        return NO_FAILURE
    return _from_evidence(found, events, facts)


def _warned_at_exit(teardown: Sequence[Event], facts: JobFacts) -> bool:
    """Teardown lines that a normal exit prints too (torch's "process group has NOT been
    destroyed" warning), after training progressed, with no failure line and no process that
    exited badly: a job that ended, not one that failed. A shutdown someone asked for
    (signals, "shutting down workers") is another signature and still counts."""
    if not teardown or facts.evidence or first_real_failure(facts.child_failures) is not None:
        return False
    if facts.progress is None or facts.progress.reports == 0:
        return False
    return all(e.signature in NORMAL_EXIT_TEARDOWN for e in teardown)


NORMAL_EXIT_TEARDOWN = frozenset({"teardown.process_group_destroyed"})


def _from_evidence(found: EvidenceFinding, events: Sequence[Event], facts: JobFacts) -> Verdict:
    """A verdict of the evidence layer: a guess, so it names no node to exclude or drain."""
    culprit = find_culprit(None, (), facts.child_failures, facts.ranks_seen)
    ranks = (culprit.rank,) if culprit.rank is not None else ()
    category, confidence, basis = found.category, found.confidence, found.basis
    # The context rules read the surroundings of an evidence line as of a catalogue line (a
    # library error after the framework warned that library is not its version); still a
    # guess at the evidence layer's confidence.
    refined = refine_with_support(found.event, events, "")
    if refined is not None:
        rule, support = refined
        category, confidence = rule.category, min(rule.confidence, found.confidence)
        basis += f"; {rule.basis} ({rule.id}: {support})"
    return Verdict(
        failure=True,
        kind=found.kind,
        category=category,
        confidence=confidence,
        root_cause=found.event,
        implicated=Implicated(ranks=ranks),
        cascades=noise(events, None),
        basis=f"{basis}; culprit: {culprit.basis}",
    )


def _read_evidence(events: Sequence[Event], facts: JobFacts) -> EvidenceFinding | None:
    """The evidence layer on the failure lines no signature knows, and on exception lines
    that close no visible traceback (an excerpt that kept only the last line): those are
    failure evidence too, their words naming the category like any other line's."""
    explained = {(e.source, e.line) for e in events if e.role is not Role.CONTEXT}
    lone = [
        EvidenceLine(e.source or "", e.line, e.text, facts.progress_after.get(e, 0))
        for e in events
        if e.signature == LONE_EXCEPTION
        and (e.source, e.line) not in explained
        and not _survived(e, facts.progress_after)
    ]
    if not lone:
        return read_evidence(facts.evidence, facts.evidence_count)
    lines = sorted((*facts.evidence, *lone), key=lambda e: (e.source, e.line))
    return read_evidence(lines, facts.evidence_count + len(lone))


LONE_EXCEPTION = "py.exception_line"


def _named_by_evidence(verdict: Verdict, facts: JobFacts) -> Verdict:
    """An unknown verdict of the layers above, its category named by the failure lines."""
    found = read_evidence(facts.evidence, facts.evidence_count)
    if found is None or found.category is Category.UNKNOWN:
        return verdict
    kind = Kind.HANG if Kind.HANG in (verdict.kind, found.kind) else verdict.kind
    return replace(
        verdict,
        kind=kind,
        category=found.category,
        confidence=min(max(verdict.confidence, found.confidence), found.confidence),
        implicated=replace(verdict.implicated, nodes=()),
        basis=f"{verdict.basis}; named by {found.basis}",
    )
