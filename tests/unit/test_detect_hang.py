"""Hang rule: threshold, checkpoint extension, timeout short-cut, start-up grace."""

from __future__ import annotations

import dataclasses

from trainmedic.core.detect import SMALL_JOB, JobDetectorState, Trigger
from trainmedic.core.model import Category, Event, Kind, Role
from trainmedic.core.observations import CheckpointSaved, JobStatus, Progress
from trainmedic.core.states import JobState

JOB = "j1"


def running(t: float = 0.0, attempt: int = 0) -> JobStatus:
    return JobStatus(
        time=t, job_id=JOB, state=JobState.RUNNING, nodes=("n1", "n2"), attempt=attempt
    )


def feed_steps(state: JobDetectorState, start: float, first: int, count: int, step: float) -> float:
    t = start
    for i in range(first, first + count):
        t += step
        for rank in range(4):
            state.observe(Progress(time=t, job_id=JOB, iteration=i, rank=rank, step_time=step))
    return t


def test_hang_after_floor_when_steps_are_fast() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    state.observe(running())
    last = feed_steps(state, 0.0, 1, 100, 0.01)
    assert state.check(last + 4.9) == ()
    (hang,) = state.check(last + 5.1)
    assert hang.kind is Kind.HANG and hang.trigger is Trigger.NO_PROGRESS
    assert hang.since == last and hang.iteration == 100
    assert state.check(last + 6.0) == (), "a hang is reported once per episode"
    last = feed_steps(state, last + 6.0, 101, 10, 0.01)
    assert state.check(last + 1.0) == ()
    assert len(state.check(last + 5.5)) == 1, "after progress resumed a new hang is new"


def test_threshold_scales_with_p99_step_time() -> None:
    state = JobDetectorState(JOB, dataclasses.replace(SMALL_JOB, hang_k=6, hang_floor_s=5))
    state.observe(running())
    last = feed_steps(state, 0.0, 1, 30, 2.0)
    assert state.p99_step_s == 2.0
    assert state.check(last + 11.5) == ()
    assert len(state.check(last + 12.5)) == 1


def test_checkpoint_in_progress_extends_window_until_saved() -> None:
    state = JobDetectorState(JOB, dataclasses.replace(SMALL_JOB, checkpoint_cap_s=600))
    state.observe(running())
    last = feed_steps(state, 0.0, 1, 100, 0.01)
    state.observe(CheckpointSaved(time=last + 0.01, job_id=JOB, iteration=100, in_progress=True))
    assert state.check(last + 30.0) == ()
    assert state.check(last + 300.0) == ()
    state.observe(CheckpointSaved(time=last + 300.0, job_id=JOB, iteration=100))
    assert state.check(last + 304.0) == (), "the saved line restarts the window"
    (hang,) = state.check(last + 305.5)
    assert hang.kind is Kind.HANG


def test_checkpoint_that_never_finishes_hangs_after_cap() -> None:
    state = JobDetectorState(JOB, dataclasses.replace(SMALL_JOB, checkpoint_cap_s=60))
    state.observe(running())
    last = feed_steps(state, 0.0, 1, 100, 0.01)
    state.observe(CheckpointSaved(time=last, job_id=JOB, iteration=100, in_progress=True))
    assert state.check(last + 59.0) == ()
    (hang,) = state.check(last + 61.0)
    assert "checkpoint" in hang.basis


def test_timeout_line_cuts_the_hang_short() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    state.observe(running())
    last = feed_steps(state, 0.0, 1, 100, 0.01)
    timeout = Event(
        signature="gloo.timed_out_waiting",
        category=Category.UNKNOWN,
        kind=Kind.HANG,
        role=Role.CASCADE,
        line=7,
        text="RuntimeError: Timed out waiting 30000ms for recv operation to complete",
        rank=1,
        node="n1",
    )
    state.observe_event(timeout, last + 1.0)
    (hang,) = state.check(last + 1.0)
    assert hang.trigger is Trigger.COMM_TIMEOUT and hang.since == last
    assert hang.ranks == (), "a cascading timeout names the waiting (innocent) rank: not named"
    assert state.check(last + 10.0) == (), "the same episode is not reported again"


def test_no_false_hang_before_first_iteration_within_grace() -> None:
    state = JobDetectorState(JOB, dataclasses.replace(SMALL_JOB, startup_grace_s=60))
    state.observe(running(10.0))
    assert state.check(40.0) == ()
    assert state.check(69.0) == ()
    (hang,) = state.check(71.0)
    assert hang.trigger is Trigger.NO_FIRST_ITERATION and hang.since == 10.0


def test_no_hang_when_job_not_running() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    state.observe(running())
    last = feed_steps(state, 0.0, 1, 50, 0.01)
    state.observe(JobStatus(time=last + 0.1, job_id=JOB, state=JobState.COMPLETED))
    assert state.check(last + 100.0) == ()
    pending = JobDetectorState(JOB, SMALL_JOB)
    pending.observe(JobStatus(time=0.0, job_id=JOB, state=JobState.PENDING))
    assert pending.check(1000.0) == ()


def test_new_attempt_resets_progress_and_gets_grace() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    state.observe(running())
    last = feed_steps(state, 0.0, 1, 50, 0.01)
    assert len(state.check(last + 6.0)) == 1
    state.observe(running(last + 7.0, attempt=1))
    assert state.check(last + 20.0) == (), "restarted job is within its start-up grace"
    resumed = feed_steps(state, last + 20.0, 41, 20, 0.01)
    assert state.check(resumed + 1.0) == ()


def test_steps_that_include_a_checkpoint_save_do_not_inflate_the_threshold() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    state.observe(running())
    t = 0.0
    for it in range(1, 201):
        step = 0.01
        if it % 20 == 1 and it > 1:
            step = 6.5  # this step includes the save begun after the previous one
        t += step
        state.observe(Progress(time=t, job_id=JOB, iteration=it, rank=0, step_time=step))
        if it % 20 == 0:
            state.observe(CheckpointSaved(time=t, job_id=JOB, iteration=it, in_progress=True))
            state.observe(CheckpointSaved(time=t + 6.5, job_id=JOB, iteration=it))
    assert state.p99_step_s == 0.01
