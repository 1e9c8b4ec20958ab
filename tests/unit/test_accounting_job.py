"""The pure accounting: one job's wall time split into productive time and badput."""

from __future__ import annotations

import dataclasses

import pytest

from trainmedic.core.accounting import (
    AdviceFacts,
    AttemptFacts,
    CheckpointFacts,
    IncidentFacts,
    JobFacts,
    account_job,
)
from trainmedic.core.goodput import clip, goodput, length, subtract, union
from trainmedic.core.model import Action, Category, Kind

# Attempt 0 trains 20 -> 120 s (iterations 0 -> 100), one checkpoint write measured (iter 40,
# 58 -> 62 s) and one only seen saved (iter 80 at 100 s); a GPU crash at 121 s is detected at
# 123 s; the executor's restart converges at 131 s; attempt 1 starts at 130 s and trains again
# from 140 s (iteration 81, resumed from checkpoint 80).
ATTEMPT0 = AttemptFacts(0, 10.0, 124.0, "FAILED", ("n1", "n2"), 0, 100, 20.0, 120.0)
ATTEMPT1 = AttemptFacts(1, 130.0, None, "", ("n1", "n3"), 81, 141, 140.0, 200.0)
CRASH = IncidentFacts(1, 0, Kind.CRASH, Category.GPU_HARDWARE, 123.0, 121.0, ("n2",))
RESTART = AdviceFacts(1, 0, Action.RESTART_EXCLUDING, False, "converged", 123.0, 1, 124.0, 131.0)
JOB = JobFacts(
    job_id="j1",
    registered_at=0.0,
    state="RUNNING",
    attempts=(ATTEMPT0, ATTEMPT1),
    checkpoints=(CheckpointFacts(0, 40, 58.0, 62.0), CheckpointFacts(0, 80, None, 100.0)),
    incidents=(CRASH,),
    advice=(RESTART,),
)


def test_interval_arithmetic() -> None:
    assert union([(5, 6), (0, 2), (1, 3), (4, 4)]) == [(0, 3), (5, 6)]
    assert subtract([(0, 10)], [(2, 3), (5, 12)]) == [(0, 2), (3, 5)]
    assert clip([(0, 10), (20, 30)], 5, 25) == [(5, 10), (20, 25)]
    assert length([(0, 2), (1, 3)]) == 3
    assert goodput([(0, 10)], 0, 20, blocked=[(0, 5)]) == 0.25
    assert goodput([(0, 10)], 5, 5) is None  # no wall time: not measured


def test_crash_restart_split_into_the_six_figures() -> None:
    account = account_job(JOB, now=200.0)
    (gap,) = account.interruptions
    assert (gap.category, gap.kind, gap.incident_ids, gap.advice_id) == (
        "gpu_hardware",
        "crash",
        (1,),
        1,
    )
    assert (gap.resumed_from_iteration, gap.lost_basis) == (80, "checkpoint")
    assert gap.step_time_s == pytest.approx(0.96)  # (100 s - 4 s writing) / 100 steps
    assert gap.lost_iterations == 20
    assert gap.lost_work_s == pytest.approx(19.2)
    assert gap.shutdown_s == 4.0  # last progress 120 -> stopped 124
    assert gap.detection_s == 2.0  # fault 121 -> incident 123
    assert gap.decision_action_s == 8.0  # incident 123 -> converged 131
    assert gap.human_wait_s == 0.0  # action mode: nobody waited for
    assert gap.restart_s == 10.0  # running 130 -> first progress 140
    assert gap.window == (120.0, 140.0) and not gap.open
    assert [(p.value, round(b - a, 6)) for p, (a, b) in gap.slices] == [
        ("detection", 3.0),
        ("decision_action", 7.0),
        ("restart", 10.0),
    ]


def test_wall_time_adds_up_and_goodput_is_the_one_definition() -> None:
    account = account_job(JOB, now=200.0)
    parts = account.by_part()
    assert sum(parts.values()) == pytest.approx(account.wall_s) == pytest.approx(200.0)
    assert parts["checkpoint"] == pytest.approx(4.0)
    assert parts["lost_work"] == pytest.approx(19.2)
    assert parts["startup"] == pytest.approx(20.0)
    assert parts["other"] == pytest.approx(0.0)
    assert account.productive_s == pytest.approx(160 - 4 - 19.2)
    assert account.goodput == pytest.approx((160 - 4 - 19.2) / 200)
    assert account.by_cause()["gpu_hardware"] == pytest.approx(19.2 + 20.0)
    assert (account.checkpoints_measured, account.checkpoints_unmeasured) == (1, 1)
    first, second = account.attempts
    assert first.checkpoint_s == pytest.approx(4.0) and second.checkpoint_s is None
    assert first.incident_ids == (1,)
    # A window clips the same segments: the last 100 s hold the interruption and attempt 1.
    assert sum(account.by_part(100.0, 200.0).values()) == pytest.approx(100.0)


def test_monitor_mode_counts_the_wait_for_a_person() -> None:
    advice = dataclasses.replace(RESTART, monitor=True, status="recorded", converged_at=None)
    account = account_job(dataclasses.replace(JOB, advice=(advice,)), now=200.0)
    (gap,) = account.interruptions
    assert gap.decision_action_s == 7.0 == gap.human_wait_s  # incident 123 -> running 130
    assert account.by_part()["human_wait"] == pytest.approx(7.0)
    assert account.by_part()["decision_action"] == 0.0


def test_an_open_interruption_runs_to_now() -> None:
    hang = IncidentFacts(2, 1, Kind.HANG, Category.UNKNOWN, 220.0, 200.0)
    waiting = AdviceFacts(2, 1, Action.RESTART, True, "recorded", 220.0, 2)
    job = dataclasses.replace(JOB, incidents=(CRASH, hang), advice=(RESTART, waiting))
    account = account_job(job, now=260.0)
    gap = account.interruptions[-1]
    assert gap.open and gap.window == (200.0, 260.0)
    assert gap.decision_action_s is None  # nobody has acted yet: not measured
    assert [p.value for p, _ in gap.slices] == ["detection", "human_wait"]
    # Attempt 1 saved no checkpoint after resuming from 80: its 60 s of training are lost too.
    assert gap.lost_iterations == 61 and gap.lost_basis == "checkpoint"
    assert account.by_cause()["unknown"] == pytest.approx(60.0 + 60.0)


def test_missing_inputs_are_not_measured_never_zero() -> None:
    bare = AttemptFacts(0, 5.0, 30.0, "FAILED", (), 0, 10, 10.0, 20.0)
    crash = dataclasses.replace(CRASH, fault_time=None)
    job = JobFacts("j2", 0.0, "FAILED", True, (bare,), (), (crash,), ())
    account = account_job(job, now=1000.0)
    (gap,) = account.interruptions
    assert gap.lost_work_s is None  # no checkpoint seen and no attempt resumed
    assert gap.detection_s is None  # no fault time
    assert gap.decision_action_s is None and gap.human_wait_s is None  # no advice
    assert account.checkpoint_s is None and account.lost_work_s is None
    assert account.end == 30.0  # a finished job ends at its last attempt's stop
    empty = account_job(JobFacts("j3", 50.0), now=50.0)
    assert empty.goodput is None and empty.wall_s == 0.0


def test_finished_job_goodput_does_not_decay() -> None:
    done = dataclasses.replace(ATTEMPT1, ended_at=200.0, end_state="COMPLETED")
    job = dataclasses.replace(JOB, attempts=(ATTEMPT0, done), state="COMPLETED", terminal=True)
    assert account_job(job, now=201.0).goodput == account_job(job, now=9e9).goodput


def test_an_attempt_that_never_trained_hands_over_its_window() -> None:
    dead = AttemptFacts(1, 130.0, 135.0, "FAILED", ("n4",))
    third = AttemptFacts(2, 150.0, None, "", ("n1",), 81, 100, 160.0, 180.0)
    init_crash = IncidentFacts(3, 1, Kind.CRASH, Category.NETWORK_HARDWARE, 134.0, 133.0)
    job = dataclasses.replace(JOB, attempts=(ATTEMPT0, dead, third), incidents=(CRASH, init_crash))
    account = account_job(job, now=180.0)
    first, second = account.interruptions
    assert first.window == (120.0, 130.0)  # until the next attempt's own interruption begins
    assert second.window == (130.0, 160.0) and second.category == "network_hardware"
    assert sum(account.by_part().values()) == pytest.approx(180.0)


def test_a_job_its_owner_cancelled_ended_without_an_interruption() -> None:
    done = dataclasses.replace(ATTEMPT1, ended_at=201.0, end_state="CANCELLED")
    cancelled = dataclasses.replace(
        JOB, attempts=(ATTEMPT0, done), state="CANCELLED", terminal=True
    )
    assert len(account_job(cancelled, now=300.0).interruptions) == 1  # only the crash
    failed = dataclasses.replace(cancelled, state="NODE_FAIL")
    assert len(account_job(failed, now=300.0).interruptions) == 2
