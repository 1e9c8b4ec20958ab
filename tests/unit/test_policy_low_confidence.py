"""A guess (confidence < 0.5) never stops a job on its own say-so and never drains a node:
it restarts; only the progress rules (no checkpoint across N attempts, budget spent) stop."""

from __future__ import annotations

import dataclasses

from test_policy_decide import APP_ERROR, NODES, ctx, event

from trainmedic.core.model import Action, Category, EvidenceSource, Implicated, Kind, Verdict
from trainmedic.core.policy import AttemptRecord, decide


def _guess(verdict: Verdict) -> Verdict:
    return dataclasses.replace(verdict, confidence=0.4)


def test_a_guessed_application_failure_restarts_until_it_repeats_at_the_same_iteration() -> None:
    first = decide(_guess(APP_ERROR), ctx(new_checkpoint=True))
    assert first.action is Action.RESTART
    earlier = AttemptRecord(0, Category.APPLICATION, "python.key_error", 120, NODES, True)
    repeated = decide(_guess(APP_ERROR), ctx(attempts=(earlier,), new_checkpoint=True))
    assert repeated.action is Action.STOP and "repetition is the evidence" in repeated.basis


def test_a_guessed_unknown_cause_never_drains_a_repeat_offender() -> None:
    hang = Verdict(
        failure=True,
        kind=Kind.HANG,
        category=Category.UNKNOWN,
        confidence=0.9,
        root_cause=event(
            "slurm.node_flaky", Category.NODE_HARDWARE, EvidenceSource.SCHEDULER, "node2"
        ),
        implicated=Implicated(nodes=("node2",)),
    )
    history = {"node2": 5}
    sure = decide(hang, ctx(node_history=history))
    assert sure.exclude_nodes == ("node2",) and sure.drain_nodes == ("node2",)
    guess = decide(_guess(hang), ctx(node_history=history))
    assert guess.exclude_nodes == ("node2",) and guess.drain_nodes == ()


def test_progress_rules_still_stop_a_guess_that_never_checkpoints() -> None:
    earlier = tuple(AttemptRecord(n, Category.UNKNOWN, None, 10, NODES, False) for n in range(3))
    guess = _guess(dataclasses.replace(APP_ERROR, category=Category.UNKNOWN))
    assert decide(guess, ctx(attempts=earlier)).action is Action.STOP
