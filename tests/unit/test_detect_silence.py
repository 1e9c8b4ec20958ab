"""Silence is not failure: a job whose log or scheduler cannot be read is never called hung."""

from __future__ import annotations

from trainmedic.core.detect import SMALL_JOB, JobDetectorState, Trigger
from trainmedic.core.engine.engine import Engine
from trainmedic.core.observations import (
    JobStatus,
    Progress,
    SourceRecovered,
    SourceStale,
)
from trainmedic.core.states import JobState

JOB = "j1"
LOG = "log:/runs/j1/job.out"


def steady(state: JobDetectorState) -> float:
    state.observe(JobStatus(0.0, JOB, JobState.RUNNING, ("n1",)))
    t = 1.0
    for i in range(1, 50):
        state.observe(Progress(t, JOB, i, rank=0, step_time=0.01, received=t))
        t += 0.01
    return t - 0.01


def test_a_vanished_log_is_unknown_not_a_hang() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    last = steady(state)
    state.observe(SourceStale(last + 1.0, LOG, "/runs/j1/job.out: No such file", job_id=JOB))
    assert state.unknown_sources == {LOG: "/runs/j1/job.out: No such file"}
    assert state.check(last + 60.0) == (), "no hang while the log cannot be read"
    assert state.check(last + 3600.0) == ()
    # Readable again: silence counts from then, not from the last report before the outage.
    state.observe(SourceRecovered(last + 4000.0, LOG, job_id=JOB))
    assert state.check(last + 4000.0 + 4.0) == ()
    (hang,) = state.check(last + 4000.0 + 6.0)
    assert hang.trigger is Trigger.NO_PROGRESS


def test_a_failed_scheduler_poll_is_unknown_not_a_hang() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    last = steady(state)
    state.observe(SourceStale(last + 0.5, "scheduler", "squeue: timed out", job_id=JOB))
    assert state.check(last + 600.0) == ()
    state.observe(SourceRecovered(last + 700.0, "scheduler", job_id=JOB))
    assert len(state.check(last + 706.0)) == 1


def test_no_first_report_while_the_log_is_unknown_is_no_hang_either() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    state.observe(JobStatus(0.0, JOB, JobState.RUNNING, ("n1",)))
    state.observe(SourceStale(0.0, LOG, "permission denied", job_id=JOB))
    assert state.check(SMALL_JOB.startup_grace_s + 100.0) == ()


def test_a_stale_checkpoint_dir_or_another_jobs_log_does_not_hide_a_hang() -> None:
    state = JobDetectorState(JOB, SMALL_JOB)
    last = steady(state)
    state.observe(SourceStale(last, "checkpoints:/ckpt", "gone", job_id=JOB))
    state.observe(SourceStale(last, "log:/other.out", "gone", job_id="other"))
    assert len(state.check(last + 6.0)) == 1


def test_the_engine_hands_source_status_to_the_jobs_detector() -> None:
    engine = Engine(SMALL_JOB, settle_s=0.5)
    engine.watch(JOB)
    engine.observe(JobStatus(0.0, JOB, JobState.RUNNING, ("n1",)), 0.0)
    for i in range(1, 40):
        t = 1.0 + 0.1 * i
        engine.observe(Progress(t, JOB, i, rank=0, step_time=0.1, received=t), t)
    engine.observe(SourceStale(5.0, LOG, "gone", job_id=JOB), 5.0)
    assert engine.evaluate(100.0) == []
    engine.observe(SourceRecovered(200.0, LOG, job_id=JOB), 200.0)
    assert engine.evaluate(204.0) == []
    engine.evaluate(206.0)
    (finding,) = engine.evaluate(207.0)
    assert finding.anomaly.trigger is Trigger.NO_PROGRESS


def test_a_job_of_unknown_progress_format_is_no_start_up_hang_until_it_reports() -> None:
    """The service's ``progress`` source goes unknown when none of the job's lines is progress
    (service.progress_format): no hang, not even "no first report"; a report brings it back."""
    state = JobDetectorState(JOB, SMALL_JOB)
    state.observe(JobStatus(0.0, JOB, JobState.RUNNING, ("n1",)))
    grace = SMALL_JOB.startup_grace_s
    state.observe(SourceStale(grace, "progress", "no line read is progress", job_id=JOB))
    assert state.check(grace + 1.0) == ()
    assert state.check(grace + 3600.0) == ()
    state.observe(SourceRecovered(grace + 4000.0, "progress", job_id=JOB))
    state.observe(Progress(grace + 4000.0, JOB, 1, rank=0, received=grace + 4000.0))
    assert state.unknown_sources == {}
