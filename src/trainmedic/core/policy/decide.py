"""The recovery policy: restart, restart excluding nodes, drain, or stop.

``decide(verdict, context) -> Advice`` is pure. Rules, in the order they apply:

1. no failure -> none; a straggler -> report it (or restart without its node, opt-in);
2. scheduler causes (preemption, time limit) -> restart; they never spend a budget;
3. a deterministic application error (same signature at the same iteration as an earlier
   attempt, whichever nodes; "same" within the job's report interval in steps, see
   ``iteration_match``) -> stop: the confirmation retry has confirmed it;
4. ``max_attempts_without_checkpoint`` failed attempts in a row with no new checkpoint -> stop;
5. the cause's retry budget (``[policy.retry_budget]``) is spent -> stop; a failure after
   progress (new checkpoint, or iterations past the previous failure) spends nothing;
6. a first application error -> one confirmation retry (on other nodes when spares allow);
7. hardware -> restart excluding the implicated nodes, drain per ``isolation``;
8. system software -> restart excluding the node it names (no drain); unknown -> restart in
   place, excluding (and draining) only repeat offenders; storage -> restart.

Every Advice carries a ``basis`` saying which rule decided and why (NVRx's decision_basis).
A stop is advised whatever ``stop_enforcement`` says; the basis notes when enforcement is off
(the executor then records it and leaves the job to its owner).

The same function advises ``analyze`` (with ``PolicyContext.offline()``: no history, no
cluster) and the service, so one verdict gets one answer. Its table, for a first failure:

=====================================  ====================  ===================================
Verdict                                Action                Nodes
=====================================  ====================  ===================================
no failure                             none
hardware, nodes implicated             restart_excluding     exclude the implicated nodes; drain
                                                             them only on strong system-source
                                                             evidence (kernel log, telemetry,
                                                             scheduler), never on app stdout
hardware, no node named                restart
any guess (confidence < 0.5)           restart               too unsure to stop a job or drain a
                                                             node (a repeat offender may still be
                                                             excluded); it is stopped only by the
                                                             same failure at the same iteration
                                                             again, or the progress rules
application, confident                 restart (service:     offline, where no retry follows:
                                       confirmation retry)   stop
scheduler (preemption, time limit)     restart               spends no budget
system software                        restart(_excluding)   the node it names, never drained
storage, unknown                       restart               the retry budget stops a loop
=====================================  ====================  ===================================
"""

from __future__ import annotations

from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.core.policy.context import AttemptRecord, PolicyContext
from trainmedic.core.policy.isolation import choose_isolation
from trainmedic.core.policy.iteration_match import iteration_tolerance, same_iteration


def spends_budget(verdict: Verdict, context: PolicyContext) -> bool:
    """Whether this failure counts against its category's retry budget."""
    if not verdict.failure or verdict.kind is Kind.STRAGGLER:
        return False
    if context.config.retry_budget.for_category(verdict.category) is None:
        return False
    return not context.progressed


def attempts_without_checkpoint(verdict: Verdict, context: PolicyContext) -> int:
    """Failed attempts in a row, this one included, during which no new checkpoint appeared."""
    budgets = context.config.retry_budget
    if budgets.for_category(verdict.category) is None or context.new_checkpoint:
        return 0
    streak = 1
    for record in reversed(context.attempts):
        if budgets.for_category(record.category) is None:
            continue  # a preemption neither counts nor breaks the streak
        if record.new_checkpoint:
            break
        streak += 1
    return streak


def budget_used(category: Category, context: PolicyContext) -> int:
    """Budget already spent by the job for this cause; the hardware categories share one
    budget (``retry_budget.hardware``), so their counts add up."""
    if category.is_hardware():
        return sum(n for c, n in context.budget_used.items() if c.is_hardware())
    return context.budget_used.get(category, 0)


def same_failure(verdict: Verdict, context: PolicyContext) -> AttemptRecord | None:
    """An earlier attempt that failed with this signature at this iteration (within the lag
    the job's report interval explains: ``iteration_match``)."""
    signature = verdict.root_cause.signature if verdict.root_cause else None
    iteration = context.iteration
    if signature is None or iteration is None:
        return None
    for record in reversed(context.attempts):
        if (
            record.signature == signature
            and record.iteration is not None
            and same_iteration(record.iteration, iteration, context.report_interval_steps)
        ):
            return record
    return None


STOP_CONFIDENCE = 0.5
"""Below this, a verdict is a guess: it neither stops a job nor shrinks it."""


def decide(verdict: Verdict, context: PolicyContext) -> Advice:
    cfg = context.config
    cat = verdict.category
    if not verdict.failure:
        return Advice(Action.NONE, "no failure: nothing to do")
    if verdict.kind is Kind.STRAGGLER:
        return _straggler(verdict, context)
    what = _describe(verdict)
    budget = cfg.retry_budget.for_category(cat)
    if budget is None:
        return Advice(
            Action.RESTART, f"{what}: requeue from the checkpoint; spends no retry budget"
        )
    if cat is Category.APPLICATION:
        # Even a guess (an exception no signature knows) stops here: the same failure at the
        # same iteration after the confirmation retry is the repetition that confirms it; a
        # first occurrence of a guess is only ever restarted (below).
        earlier = same_failure(verdict, context)
        if earlier is not None:
            where = (
                "on different nodes"
                if set(earlier.nodes) != set(context.current_nodes)
                else "on the same nodes"
            )
            lag = ""
            if earlier.iteration != context.iteration:
                lag = (
                    f" (read at {earlier.iteration} there: within the job's report interval "
                    f"of {iteration_tolerance(context.report_interval_steps)} steps)"
                )
            return _stop(
                context,
                f"{what}: deterministic application error, same failure at iteration "
                f"{context.iteration} as attempt {earlier.attempt}{lag} {where}; the "
                "confirmation retry confirmed it"
                + (
                    ""
                    if verdict.confidence >= STOP_CONFIDENCE
                    else " (the verdict alone was a guess; the repetition is the evidence)"
                ),
            )
    streak = attempts_without_checkpoint(verdict, context)
    if streak >= cfg.max_attempts_without_checkpoint:
        return _stop(context, f"{what}: {streak} attempts in a row without a new checkpoint")
    spent = spends_budget(verdict, context)
    used = budget_used(cat, context) + (1 if spent else 0)
    if spent and used > budget:
        return _stop(context, f"{what}: {cat.value} retry budget spent ({budget} without progress)")
    budget_note = (
        f"{cat.value} budget {used}/{budget} used"
        if spent
        else "progress since the previous failure: no retry budget spent"
    )
    if cat is Category.APPLICATION:
        if verdict.confidence < STOP_CONFIDENCE:
            return Advice(
                Action.RESTART,
                f"{what}; {budget_note}; application cause suspected but not certain: restart",
            )
        if not context.confirm_application_errors:
            return _stop(
                context, f"{what}: deterministic application error, a restart would repeat it"
            )
        return _confirmation_retry(context, f"{what}; {budget_note}", verdict.implicated.nodes)
    if cat.is_hardware() and verdict.confidence < STOP_CONFIDENCE:
        return Advice(
            Action.RESTART,
            f"{what}; {budget_note}; suspected with low confidence: restart on the same nodes "
            "and watch",
        )
    if cat.is_hardware() or cat in (Category.SYSTEM_SOFTWARE, Category.UNKNOWN):
        isolation = choose_isolation(
            verdict,
            context,
            # A guess (< STOP_CONFIDENCE) may move the job off a repeat offender, never drain.
            may_drain=cat is not Category.SYSTEM_SOFTWARE and verdict.confidence >= STOP_CONFIDENCE,
            offenders_only=cat is Category.UNKNOWN,
        )
        notes = "; ".join(isolation.notes)
        basis = f"{what}; {budget_note}" + (f"; {notes}" if notes else "")
        if isolation.exclude:
            return Advice(
                Action.RESTART_EXCLUDING,
                f"{basis}; restart excluding {', '.join(isolation.exclude)}",
                exclude_nodes=isolation.exclude,
                drain_nodes=isolation.drain,
                breaker_trip=isolation.breaker_trip,
            )
        if cat.is_hardware() and not verdict.implicated.nodes:
            basis += "; no node named: restart in place"
        return Advice(Action.RESTART, basis)
    return Advice(Action.RESTART, f"{what}; {budget_note}; restart from the checkpoint")


def _describe(verdict: Verdict) -> str:
    signature = verdict.root_cause.signature if verdict.root_cause else "no root-cause line"
    nodes = f" on {', '.join(verdict.implicated.nodes)}" if verdict.implicated.nodes else ""
    return f"{verdict.kind.value} / {verdict.category.value} ({signature}){nodes}"


def _stop(context: PolicyContext, basis: str) -> Advice:
    if context.config.stop_enforcement:
        return Advice(Action.STOP, f"stop: {basis}")
    return Advice(
        Action.STOP,
        f"stop: {basis} (stop enforcement off: recorded only, the job is left to its owner)",
    )


def _confirmation_retry(
    context: PolicyContext, basis: str, implicated: tuple[str, ...] = ()
) -> Advice:
    """Retry once, moving off as many of the current nodes as there are spares (the nodes the
    error came from first): the same error on a different node set rules the nodes out."""
    current = context.current_nodes
    room = len(context.healthy_spares)
    if context.confirm_on_other_nodes and current and room:
        ordered = [n for n in implicated if n in current]
        ordered += [n for n in reversed(current) if n not in ordered]
        chosen = set(ordered[:room])
        moved = tuple(n for n in current if n in chosen)
        scope = (
            "other nodes"
            if len(moved) == len(current)
            else f"a node set without {', '.join(moved)}"
        )
        return Advice(
            Action.RESTART_EXCLUDING,
            f"{basis}; first occurrence: confirmation retry on {scope} to rule the nodes out",
            exclude_nodes=moved,
        )
    return Advice(Action.RESTART, f"{basis}; first occurrence: confirmation retry")


def _straggler(verdict: Verdict, context: PolicyContext) -> Advice:
    nodes = verdict.implicated.nodes
    ranks = verdict.implicated.ranks
    who = (
        ", ".join([f"rank {r}" for r in ranks] + ([f"node {n}" for n in nodes] if nodes else []))
        or "no single rank or node"
    )
    if context.restart_on_straggler and nodes:
        isolation = choose_isolation(verdict, context, may_drain=False)
        if isolation.exclude:
            return Advice(
                Action.RESTART_EXCLUDING,
                f"straggler: {who} slow; restart excluding {', '.join(isolation.exclude)}",
                exclude_nodes=isolation.exclude,
            )
    return Advice(Action.NONE, f"straggler: {who} slow; reported, the job keeps running")
