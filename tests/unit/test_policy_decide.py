"""Each policy rule as a test: budgets, stop rules, exclusion, drain, circuit breaker."""

from __future__ import annotations

import dataclasses

import pytest

from trainmedic.core.model import (
    Action,
    Category,
    Event,
    EvidenceSource,
    Implicated,
    Kind,
    Role,
    Verdict,
)
from trainmedic.core.policy import AttemptRecord, PolicyContext, decide, spends_budget
from trainmedic.service.config import PolicyConfig, RetryBudgets

NODES = ("node1", "node2")
SPARES = ("node3", "node4")


def event(
    signature: str,
    category: Category,
    evidence: EvidenceSource = EvidenceSource.APP_LOG,
    node: str | None = None,
    strong: bool = False,
) -> Event:
    return Event(
        signature=signature,
        category=category,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=1,
        text=signature,
        evidence=evidence,
        node=node,
        strong=strong,
    )


def verdict(
    category: Category,
    root: Event | None = None,
    nodes: tuple[str, ...] = (),
    kind: Kind = Kind.CRASH,
) -> Verdict:
    return Verdict(
        failure=True,
        kind=kind,
        category=category,
        confidence=0.9,
        root_cause=root,
        implicated=Implicated(nodes=nodes),
    )


XID79_KERNEL = verdict(
    Category.GPU_HARDWARE,
    event("nvrm.xid", Category.GPU_HARDWARE, EvidenceSource.KERNEL_LOG, "node2", strong=True),
    ("node2",),
)
XID79_STDOUT = verdict(
    Category.GPU_HARDWARE,
    event("nvrm.xid", Category.GPU_HARDWARE, EvidenceSource.APP_LOG, "node2", strong=True),
    ("node2",),
)
APP_ERROR = verdict(Category.APPLICATION, event("python.key_error", Category.APPLICATION))


def ctx(**changes: object) -> PolicyContext:
    base = PolicyContext(
        job_id="j1",
        iteration=120,
        current_nodes=NODES,
        healthy_spares=SPARES,
        cluster_size=4,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_no_failure_does_nothing() -> None:
    advice = decide(Verdict(False, Kind.NONE, Category.UNKNOWN, 0.0), ctx())
    assert advice.action is Action.NONE and advice.basis


@pytest.mark.parametrize("used", [0, 50])
def test_preemption_restarts_and_never_spends(used: int) -> None:
    preempted = verdict(Category.SCHEDULER, event("slurm.preempted", Category.SCHEDULER))
    context = ctx(budget_used={Category.SCHEDULER: used})
    advice = decide(preempted, context)
    assert advice.action is Action.RESTART and "no retry budget" in advice.basis
    assert not spends_budget(preempted, context)


def test_budget_spent_without_progress_stops() -> None:
    context = ctx(budget_used={Category.GPU_HARDWARE: 3, Category.NODE_HARDWARE: 2})
    advice = decide(XID79_KERNEL, context)
    assert advice.action is Action.STOP and "budget spent" in advice.basis


def test_failure_after_progress_does_not_spend_the_budget() -> None:
    for progressed in ({"new_checkpoint": True}, {"progressed_iterations": 40}):
        context = ctx(budget_used={Category.GPU_HARDWARE: 5}, **progressed)
        assert not spends_budget(XID79_KERNEL, context)
        advice = decide(XID79_KERNEL, context)
        assert advice.action is Action.RESTART_EXCLUDING and "no retry budget spent" in advice.basis


def test_stop_after_n_attempts_without_new_checkpoint() -> None:
    unknown = verdict(Category.UNKNOWN, event("python.exit", Category.UNKNOWN))
    earlier = tuple(AttemptRecord(a, Category.UNKNOWN, f"sig{a}", 100 + a, NODES) for a in range(2))
    preempt = AttemptRecord(2, Category.SCHEDULER, "slurm.preempted", 100, NODES)
    context = ctx(
        attempts=(*earlier, preempt), config=PolicyConfig(max_attempts_without_checkpoint=3)
    )
    advice = decide(unknown, context)
    assert advice.action is Action.STOP and "3 attempts in a row" in advice.basis
    with_ckpt = (
        AttemptRecord(0, Category.UNKNOWN, "s", 90, NODES, new_checkpoint=True),
        earlier[1],
    )
    advice = decide(unknown, ctx(attempts=with_ckpt, progressed_iterations=5))
    assert advice.action is Action.RESTART


def test_first_application_error_gets_a_confirmation_retry_on_other_nodes() -> None:
    advice = decide(APP_ERROR, ctx())
    assert advice.action is Action.RESTART_EXCLUDING and advice.exclude_nodes == NODES
    assert "confirmation retry" in advice.basis and advice.drain_nodes == ()
    # One spare for two nodes: move off one of them, so the node set still differs.
    advice = decide(APP_ERROR, ctx(healthy_spares=("node3",)))
    assert advice.action is Action.RESTART_EXCLUDING and len(advice.exclude_nodes) == 1
    assert advice.exclude_nodes[0] in NODES and "confirmation retry" in advice.basis
    advice = decide(APP_ERROR, ctx(healthy_spares=()))
    assert advice.action is Action.RESTART and advice.exclude_nodes == ()


def test_deterministic_application_error_stops_after_one_confirmation() -> None:
    first = AttemptRecord.from_verdict(
        0, APP_ERROR, iteration=120, nodes=NODES, new_checkpoint=False
    )
    assert first == AttemptRecord(0, Category.APPLICATION, "python.key_error", 120, NODES)
    context = ctx(attempts=(first,), current_nodes=SPARES, healthy_spares=())
    advice = decide(APP_ERROR, context)
    assert advice.action is Action.STOP
    assert "deterministic" in advice.basis and "different nodes" in advice.basis


def test_application_error_at_a_later_iteration_after_progress_is_retried() -> None:
    first = AttemptRecord(0, Category.APPLICATION, "python.key_error", 120, NODES)
    advice = decide(APP_ERROR, ctx(attempts=(first,), iteration=400, progressed_iterations=280))
    assert advice.action is not Action.STOP


def test_hardware_from_kernel_log_excludes_and_drains() -> None:
    advice = decide(XID79_KERNEL, ctx())
    assert advice.action is Action.RESTART_EXCLUDING
    assert advice.exclude_nodes == ("node2",) and advice.drain_nodes == ("node2",)
    assert "kernel_log" in advice.basis


def test_hardware_seen_only_in_job_stdout_is_never_drained() -> None:
    advice = decide(XID79_STDOUT, ctx())
    assert advice.exclude_nodes == ("node2",) and advice.drain_nodes == ()
    assert "no strong system-source evidence" in advice.basis


def test_repeat_offender_gets_drain_advice() -> None:
    # Weak evidence from the node's own kernel log, the node's second incident: drained.
    link = event("mlx5.link_down", Category.NETWORK_HARDWARE, EvidenceSource.KERNEL_LOG, "node2")
    weak = verdict(Category.NETWORK_HARDWARE, link, ("node2",))
    assert decide(weak, ctx()).drain_nodes == ()
    advice = decide(weak, ctx(node_history={"node2": 1}))
    assert advice.drain_nodes == ("node2",) and "repeat offender" in advice.basis
    unknown = verdict(Category.UNKNOWN, event("python.exit", Category.UNKNOWN), ("node1",))
    assert decide(unknown, ctx()).action is Action.RESTART, "first time: restart in place"
    # The job's own output alone: excluded from the job, never drained (core.policy.trust).
    advice = decide(unknown, ctx(node_history={"node1": 3}))
    assert advice.exclude_nodes == ("node1",) and advice.drain_nodes == ()
    kernel = event("kernel.mce", Category.NODE_HARDWARE, EvidenceSource.KERNEL_LOG, "node1")
    advice = decide(unknown, ctx(node_history={"node1": 3}, system_events=(kernel,)))
    assert advice.exclude_nodes == ("node1",) and advice.drain_nodes == ("node1",)


def test_exclusion_stays_feasible_and_prefers_system_evidence() -> None:
    both = dataclasses.replace(XID79_KERNEL, implicated=Implicated(nodes=("node1", "node2")))
    advice = decide(both, ctx(healthy_spares=("node3",)))
    assert advice.exclude_nodes == ("node2",), "the node with kernel-log evidence goes first"
    assert "node1 kept in" in advice.basis
    advice = decide(XID79_KERNEL, ctx(healthy_spares=()))
    assert advice.action is Action.RESTART and advice.exclude_nodes == ()
    assert "0 healthy spare" in advice.basis


def test_circuit_breaker_limits_drains() -> None:
    advice = decide(XID79_KERNEL, ctx(recent_drains=1))
    assert advice.exclude_nodes == ("node2",) and advice.drain_nodes == ()
    assert "circuit breaker" in advice.basis
    small = decide(XID79_KERNEL, ctx(cluster_size=2))
    assert small.drain_nodes == (), "25% of 2 nodes rounds down to no drain"


def test_drain_disabled_by_config() -> None:
    advice = decide(XID79_KERNEL, ctx(config=PolicyConfig(drain_enabled=False)))
    assert advice.exclude_nodes == ("node2",) and advice.drain_nodes == ()
    assert "draining disabled" in advice.basis


def test_stop_enforcement_is_noted_in_the_basis() -> None:
    context = ctx(budget_used={Category.STORAGE: 2})
    storage = verdict(Category.STORAGE, event("fs.enospc", Category.STORAGE))
    off = decide(storage, context)
    on = decide(storage, dataclasses.replace(context, config=PolicyConfig(stop_enforcement=True)))
    assert off.action is on.action is Action.STOP
    assert "enforcement off" in off.basis and "enforcement off" not in on.basis


def test_straggler_is_reported_not_restarted_by_default() -> None:
    slow = Verdict(
        True,
        Kind.STRAGGLER,
        Category.UNKNOWN,
        0.7,
        implicated=Implicated(nodes=("node2",), ranks=(2,)),
    )
    advice = decide(slow, ctx())
    assert advice.action is Action.NONE and "rank 2" in advice.basis and "node2" in advice.basis
    advice = decide(slow, ctx(restart_on_straggler=True))
    assert advice.action is Action.RESTART_EXCLUDING and advice.exclude_nodes == ("node2",)


def test_system_software_excludes_without_draining() -> None:
    shm = verdict(
        Category.SYSTEM_SOFTWARE,
        event("nccl.shm", Category.SYSTEM_SOFTWARE, EvidenceSource.KERNEL_LOG, "node1", True),
        ("node1",),
    )
    advice = decide(shm, ctx())
    assert advice.exclude_nodes == ("node1",) and advice.drain_nodes == ()


def test_every_category_has_a_budget_and_only_the_scheduler_is_unlimited() -> None:
    budgets = RetryBudgets()
    for category in Category:
        budget = budgets.for_category(category)
        if category is Category.SCHEDULER:
            assert budget is None
        else:
            assert isinstance(budget, int) and budget >= 0
    assert budgets.for_category(Category.APPLICATION) == 1, "one confirmation retry"
