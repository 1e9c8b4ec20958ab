"""From a verdict to advice (intent, not actuation), always with its basis.

=====================================  ====================  ===================================
Verdict                                Action                Nodes
=====================================  ====================  ===================================
no failure                             none
hardware, nodes implicated             restart_excluding     exclude the implicated nodes; drain
                                                             them only when the root event is
                                                             strong *and* came from a system
                                                             source (kernel log, telemetry,
                                                             scheduler), never from app stdout
hardware, no node named                restart
hardware, a guess (< 0.5)              restart               too unsure to shrink the job
application, confident (>= 0.5)        stop                  a deterministic error repeats
application, a guess (< 0.5)           restart               too unsure to give up on the job
scheduler (preemption, time limit)     restart
storage, system software, unknown      restart               ops must fix the cause; the retry
                                                             budget stops a loop
=====================================  ====================  ===================================
"""

from __future__ import annotations

from trainmedic.core.model import Action, Advice, Category, Verdict

STOP_CONFIDENCE = 0.5
"""Below this, neither stop a job nor shrink it: the verdict is a guess."""


def advise(verdict: Verdict) -> Advice:
    if not verdict.failure:
        return Advice(Action.NONE, "no failure found")
    category = verdict.category
    nodes = verdict.implicated.nodes
    root = verdict.root_cause
    if category.is_hardware():
        if not nodes:
            return Advice(Action.RESTART, f"{category} suspected but no node is named: restart")
        if verdict.confidence < STOP_CONFIDENCE:
            return Advice(
                Action.RESTART,
                f"{category} on {', '.join(nodes)} suspected with low confidence: restart on "
                "the same nodes and watch",
            )
        drain: tuple[str, ...] = ()
        why = "evidence not strong enough to drain"
        if root is not None and root.justifies_drain():
            drain = nodes
            why = f"strong {root.evidence} evidence ({root.signature}): drain"
        elif root is not None and root.strong:
            why = f"{root.signature} is strong but only seen in {root.evidence}: no drain"
        return Advice(
            Action.RESTART_EXCLUDING,
            f"{category} on {', '.join(nodes)}: restart without them; {why}",
            exclude_nodes=nodes,
            drain_nodes=drain,
        )
    if category is Category.APPLICATION:
        if verdict.confidence >= STOP_CONFIDENCE:
            return Advice(Action.STOP, "deterministic application error: a restart would repeat it")
        return Advice(Action.RESTART, "application cause suspected but not certain: restart once")
    if category is Category.SCHEDULER:
        return Advice(Action.RESTART, "scheduler interruption (preemption / time limit): requeue")
    if category in (Category.STORAGE, Category.SYSTEM_SOFTWARE):
        return Advice(Action.RESTART, f"{category} problem: restart after ops fix it")
    return Advice(Action.RESTART, "cause unknown: restart and watch")
