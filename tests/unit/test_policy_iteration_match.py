"""'Same failure at the same iteration' within the lag the job's report cadence explains.

An attempt's failure point is the last iteration it *reported*: a job reporting every N steps
shows a crash at step X as anything in (X - N, X], differently in each attempt. Two failure
points are the same iteration when they differ by at most the job's observed report interval
in steps (a small floor while it is unknown), never by more.
"""

from __future__ import annotations

import dataclasses

import pytest
from test_policy_decide import APP_ERROR, NODES, SPARES, ctx

from trainmedic.core.detect import DetectorConfig, JobDetectorState
from trainmedic.core.model import Action, Category
from trainmedic.core.observations import JobStatus, Progress
from trainmedic.core.policy import AttemptRecord, decide, same_failure
from trainmedic.core.policy.iteration_match import (
    FLOOR_STEPS,
    iteration_tolerance,
    same_iteration,
)
from trainmedic.core.states import JobState


def earlier(iteration: int) -> tuple[AttemptRecord, ...]:
    return (AttemptRecord(0, Category.APPLICATION, "python.key_error", iteration, NODES),)


@pytest.mark.parametrize(
    ("first", "second", "interval", "same"),
    [
        (1000, 1050, 100, True),  # a job reporting every 100 iterations: one report apart
        (1000, 1100, 100, True),
        (1000, 1500, 100, False),  # five reports apart: another point
        (3047, 3046, 3, True),  # a throttled bar: its draws 1-3 steps apart
        (3047, 3044, 3, True),
        (3047, 3040, 3, False),
        (500, 500, None, True),
        (500, 500 + FLOOR_STEPS, None, True),  # interval unknown: the floor
        (500, 502 + FLOOR_STEPS, None, False),
        (500, 500 + FLOOR_STEPS, 0, True),  # never below the floor
    ],
)
def test_two_failure_points_are_the_same_within_the_report_interval(
    first: int, second: int, interval: int | None, same: bool
) -> None:
    assert same_iteration(first, second, interval) is same
    assert same_iteration(second, first, interval) is same


def test_the_tolerance_is_the_interval_with_a_small_floor_and_nothing_wider() -> None:
    assert iteration_tolerance(None) == FLOOR_STEPS <= 2
    assert iteration_tolerance(0) == FLOOR_STEPS
    assert iteration_tolerance(100) == 100
    assert iteration_tolerance(7) == 7


def test_the_same_error_read_a_few_steps_apart_within_the_cadence_is_stopped() -> None:
    """Lightning's bar on the lab cluster: attempt 4 read at 3047, its retry at 3046, both
    failing at step 3050, the bar drawing every 1-3 steps: stopped after the retry."""
    context = ctx(
        attempts=earlier(3047),
        iteration=3046,
        report_interval_steps=3,
        current_nodes=SPARES,
        healthy_spares=(),
    )
    assert same_failure(APP_ERROR, context) == earlier(3047)[0]
    advice = decide(APP_ERROR, context)
    assert advice.action is Action.STOP, advice.basis
    assert "same failure at iteration 3046 as attempt 0" in advice.basis
    assert "read at 3047 there" in advice.basis and "3 steps" in advice.basis
    # A guess (an exception no signature knows) is stopped by the repetition alike.
    guess = dataclasses.replace(APP_ERROR, confidence=0.45)
    assert decide(guess, context).action is Action.STOP


def test_the_same_wording_at_a_clearly_different_step_is_restarted() -> None:
    """A transient that repeats its wording 40 steps later in a job reporting every 3 steps
    is another failure point: the first-occurrence rules apply (a confirmation retry)."""
    context = ctx(attempts=earlier(3007), iteration=3047, report_interval_steps=3)
    assert same_failure(APP_ERROR, context) is None
    advice = decide(APP_ERROR, context)
    assert advice.action in (Action.RESTART, Action.RESTART_EXCLUDING), advice.basis


@pytest.mark.parametrize(("apart", "stopped"), [(50, True), (500, False)])
def test_a_job_reporting_every_100_iterations(apart: int, stopped: bool) -> None:
    context = ctx(attempts=earlier(1000), iteration=1000 + apart, report_interval_steps=100)
    advice = decide(APP_ERROR, context)
    assert (advice.action is Action.STOP) is stopped, advice.basis


def test_an_exact_match_needs_no_known_interval_and_its_basis_is_unchanged() -> None:
    context = ctx(attempts=earlier(179), iteration=179)
    advice = decide(APP_ERROR, context)
    assert advice.action is Action.STOP
    assert "same failure at iteration 179 as attempt 0 on" in advice.basis


def test_the_detector_learns_the_report_interval_in_steps_per_job() -> None:
    """Iterations one report moves on, the most among the recent ones, learned across
    attempts; the jump from one attempt's last report to the next one's first is none."""
    state = JobDetectorState("j", DetectorConfig())
    state.observe(JobStatus(0.0, "j", JobState.RUNNING, NODES, 0))
    assert state.cadence.interval_steps is None
    for t, it in enumerate((100, 200, 300)):
        state.observe(Progress(float(t + 1), "j", it, 0, received=float(t + 1)))
    assert state.cadence.interval_steps == 100
    state.observe(Progress(3.5, "j", 300, 1, received=3.5))  # another rank: no new report
    assert state.cadence.interval_steps == 100
    state.observe(JobStatus(10.0, "j", JobState.RUNNING, NODES, 1))
    state.observe(Progress(11.0, "j", 5, 0, received=11.0))  # resumed far back
    state.observe(Progress(12.0, "j", 8, 0, received=12.0))
    assert state.cadence.interval_steps == 100  # the job's cadence, not reset per attempt
    bar = JobDetectorState("b", DetectorConfig())
    bar.observe(JobStatus(0.0, "b", JobState.RUNNING, NODES, 0))
    for t, it in enumerate((1, 2, 5, 6, 7)):  # a bar redrawn every 1-3 steps
        bar.observe(Progress(float(t + 1), "b", it, 0, received=float(t + 1)))
    assert bar.cadence.interval_steps == 3
