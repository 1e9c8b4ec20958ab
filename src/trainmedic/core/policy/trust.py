"""Whose word implicates a node: the cluster's own evidence, or only the job's output.

A job's output is the job's to print: any user can write ``NVRM: Xid 79 ... gpu12`` to its
stdout. So a line seen only there may move *that job* off a node it actually ran on (an
exclusion touches nobody else), and only when a line names that node (attribution implicates
only nodes its lines name: the line's host or prefix, torchrun's failure table; the engine
never implicates every node of a job for want of a name), but it never drains a node and
never enters a node's history (which would turn the next weak incident on that node,
anyone's, into a drain), whatever ``repeat_offender_count`` says.

The cluster's own word comes from system sources (``EvidenceSource.is_system``): the node's
kernel log, GPU telemetry, the scheduler. ``KernelLogSource`` only passes lines that came from
the kernel where the log's format says so (a userspace ``logger -t kernel`` line is dropped).

=========================================  =========  =====  ========================
a node implicated by ...                   exclude    drain  charges node history
=========================================  =========  =====  ========================
strong system-source evidence naming it    yes        yes    yes (strong)
weaker system-source evidence naming it    yes        repeat offenders only   yes
only the job's output, naming the node     yes        never  never
only the job's output, not naming it       never      never  never
a node the job did not run on              never      never  never
=========================================  =========  =====  ========================
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.core.model import Event, Verdict
from trainmedic.core.policy.context import PolicyContext


def verdict_events(verdict: Verdict) -> tuple[Event, ...]:
    """The events a verdict rests on: its root cause and the cascades it explains."""
    return ((verdict.root_cause,) if verdict.root_cause else ()) + verdict.cascades


def _sole_node(verdict: Verdict, context: PolicyContext) -> str | None:
    """The node a node-less scheduler event (a job's BOOT_FAIL) can only be about: the one
    node the job ran on. Never a node picked by the job's output among several."""
    nodes = context.current_nodes or verdict.implicated.nodes
    return nodes[0] if len(nodes) == 1 else None


def _names(event: Event, node: str, sole: str | None) -> bool:
    return event.node == node if event.node is not None else sole == node


def drain_evidence(verdict: Verdict, context: PolicyContext, node: str) -> Event | None:
    """Strong evidence from a system source about ``node`` among the events the verdict rests
    on (``Event.justifies_drain``): enough to drain it."""
    sole = _sole_node(verdict, context)
    for event in verdict_events(verdict):
        if event.justifies_drain() and _names(event, node, sole):
            return event
    return None


def cluster_evidence(verdict: Verdict, context: PolicyContext, node: str) -> Event | None:
    """A hardware event from a system source about ``node`` in this finding (strong or not,
    the verdict's or one of the node's kernel/telemetry/scheduler events the finding saw): the
    cluster's own word that the node is at fault. A storage or software complaint in the same
    kernel log says nothing against the node's hardware."""
    sole = _sole_node(verdict, context)
    for event in (*verdict_events(verdict), *context.system_events):
        if (
            event.evidence.is_system()
            and event.category.is_hardware()
            and _names(event, node, sole)
        ):
            return event
    return None


def job_ran_on(context: PolicyContext, node: str) -> bool:
    """``node`` is one of the failing attempt's nodes; True when they are not known (``analyze``
    reading a finished job's files, which acts on nothing)."""
    return not context.current_nodes or node in context.current_nodes


@dataclass(frozen=True, slots=True)
class NodeCharge:
    """One entry this incident adds to a node's history."""

    node: str
    strong: bool  # strong system-source evidence (enough to drain)
    reason: str  # which evidence, e.g. "kernel_log evidence nvrm.xid"


def node_charges(verdict: Verdict, context: PolicyContext) -> tuple[NodeCharge, ...]:
    """The implicated nodes this incident may enter in the node history: nodes the job ran on
    that the cluster's own evidence implicates. Never a node named only by the job's output."""
    charges: list[NodeCharge] = []
    for node in dict.fromkeys(verdict.implicated.nodes):
        if not job_ran_on(context, node):
            continue
        strong = drain_evidence(verdict, context, node)
        event = strong or cluster_evidence(verdict, context, node)
        if event is not None:
            reason = f"{event.evidence.value} evidence {event.signature}"
            charges.append(NodeCharge(node, strong is not None, reason))
    return tuple(charges)
