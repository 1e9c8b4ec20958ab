"""The hang threshold follows the job's reporting cadence, with real-job defaults.

Frameworks report every N iterations (Megatron ``--log-interval`` 100, HF ``logging_steps``
500, Lightning ``log_every_n_steps`` 50) and big jobs take minutes to their first report: a
job reporting minutes apart is healthy, and liveness is judged on when a report was *read*.
"""

from __future__ import annotations

from trainmedic.core.detect import DetectorConfig, JobDetectorState, Trigger
from trainmedic.core.detect.hang import hang_threshold
from trainmedic.core.model import Category, Event, Kind, Role
from trainmedic.core.observations import CheckpointSaved, JobStatus, Progress
from trainmedic.core.states import JobState

JOB = "big"
DEFAULT = DetectorConfig()


def status(t: float, state: JobState = JobState.RUNNING, attempt: int = 0) -> JobStatus:
    return JobStatus(time=t, job_id=JOB, state=state, nodes=("n1", "n2"), attempt=attempt)


def report(state: JobDetectorState, t: float, iteration: int, *, read: float | None = None) -> None:
    """Rank 0 prints one line per log interval (Megatron: the last rank, HF: rank 0)."""
    state.observe(
        Progress(time=t, job_id=JOB, iteration=iteration, rank=0, step_time=1.2, received=read)
    )


def megatron_job(reports: int = 10, every_s: float = 120.0) -> tuple[JobDetectorState, float]:
    """Reports at iterations 100, 200, ... every ``every_s`` (100 steps of 1.2 s)."""
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))
    t = 300.0  # start-up: imports, NCCL set-up, the first 100 iterations
    for n in range(1, reports + 1):
        report(state, t, 100 * n)
        t += every_s
    return state, t - every_s


def test_a_job_logging_every_100_iterations_is_not_hung_between_its_reports() -> None:
    state, last = megatron_job()
    # A step-time rule (k x p99 step time 1.2 s, floor 5 s) called this hung at +7 s.
    for wait in (7.0, 60.0, 119.0, 300.0, 600.0):
        assert state.check(last + wait) == (), wait
    threshold = hang_threshold(120.0, DEFAULT)
    assert threshold == 5.0 * 120.0 + 60.0
    assert state.check(last + threshold - 1.0) == ()
    (hang,) = state.check(last + threshold + 1.0)
    assert hang.trigger is Trigger.NO_PROGRESS and hang.since == last
    assert f"threshold {threshold:.1f}s" in hang.basis and "report interval" in hang.basis


def test_hf_trainer_logging_every_500_steps_with_jitter() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))
    t = 600.0
    gaps = [250.0, 262.0, 241.0, 310.0, 255.0, 248.0]  # one evaluation made a gap longer
    report(state, t, 500)
    for n, gap in enumerate(gaps, start=2):
        t += gap
        report(state, t, 500 * n)
    assert state.check(t + 5 * 310.0 + 59.0) == ()
    assert len(state.check(t + 5 * 310.0 + 61.0)) == 1


def test_a_fast_job_still_gets_the_floor_of_minutes() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))
    t = 30.0
    for i in range(1, 200):
        report(state, t, i)
        t += 0.05
    last = t - 0.05
    assert state.check(last + DEFAULT.hang_floor_s - 1.0) == ()
    assert len(state.check(last + DEFAULT.hang_floor_s + 1.0)) == 1


def test_before_the_cadence_is_known_a_report_is_followed_by_the_start_up_grace() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))
    report(state, 900.0, 100)  # the first report: when the second comes is not known yet
    assert state.check(900.0 + 1000.0) == ()
    assert state.check(900.0 + DEFAULT.startup_grace_s - 1.0) == ()
    assert len(state.check(900.0 + DEFAULT.startup_grace_s + 1.0)) == 1


def test_default_start_up_grace_is_generous_before_any_start_up_was_seen() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))
    assert DEFAULT.startup_grace_s == 1800.0
    assert state.check(1799.0) == ()
    (hang,) = state.check(1801.0)
    assert hang.trigger is Trigger.NO_FIRST_ITERATION


def test_start_up_grace_is_learned_from_observed_start_ups_across_attempts() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0, JobState.PENDING))
    state.observe(status(10.0))  # the start is seen happen
    report(state, 10.0 + 200.0, 100, read=10.0 + 200.0)  # first report 200 s after start
    assert state.cadence.startups == (200.0,)
    state.observe(status(1000.0, JobState.PENDING, attempt=1))
    state.observe(status(1020.0, attempt=1))
    learned = 3.0 * 200.0 + 60.0
    assert state.cadence.startup_grace_s == learned
    assert state.check(1020.0 + learned - 1.0) == ()
    (hang,) = state.check(1020.0 + learned + 1.0)
    assert hang.trigger is Trigger.NO_FIRST_ITERATION and f"grace {learned:.0f}s" in hang.basis


def test_a_late_line_of_the_previous_attempt_is_not_a_start_up() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))  # first seen running: attempt 0's start-up is unknown
    report(state, 10.0, 4100, read=10.0)
    state.observe(status(100.0, JobState.PENDING, attempt=1))
    state.observe(status(101.0, attempt=1))
    report(state, 99.0, 4200, read=102.0)  # attempt 0's last line, read after the requeue
    assert state.cadence.startups == (), "a 1 s start-up would make the grace far too short"
    state.observe(status(300.0, JobState.PENDING, attempt=2))
    state.observe(status(301.0, attempt=2))
    report(state, 500.0, 4001, read=500.0)  # resumed from the checkpoint at 4000
    assert state.cadence.startups == (199.0,)


def test_a_job_first_seen_already_running_teaches_no_start_up() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(5000.0))  # running for who knows how long
    report(state, 5000.5, 12300, read=5000.5)
    assert state.cadence.startups == ()
    assert state.cadence.startup_grace_s == DEFAULT.startup_grace_s


def test_liveness_uses_the_read_time_not_the_printed_time() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))
    # Printed stamps 8 h behind (a zone-less local time read as UTC), read every 60 s.
    skew = -8 * 3600.0
    for n in range(1, 6):
        read = 100.0 + 60.0 * n
        report(state, read + skew, 100 * n, read=read)
    assert state.check(400.0 + 1.0) == (), "no false hang from an old-looking stamp"
    (hang,) = state.check(400.0 + 5 * 60.0 + 60.0 + 1.0)
    assert hang.since == 400.0 + skew, "the printed time still dates the report"
    # Stamps 9 h ahead (the other way round) do not postpone a hang either.
    ahead = JobDetectorState(JOB, DEFAULT)
    ahead.observe(status(0.0))
    for n in range(1, 6):
        read = 100.0 + 60.0 * n
        report(ahead, read + 9 * 3600.0, 100 * n, read=read)
    assert len(ahead.check(400.0 + 5 * 60.0 + 60.0 + 1.0)) == 1


def test_reports_read_in_one_burst_are_spaced_by_their_printed_times() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))
    for n in range(1, 11):  # a log read again from its start: all arrive at once
        report(state, 1000.0 + 90.0 * n, 100 * n, read=5000.0)
    assert state.cadence.interval_s == 90.0


def test_buffered_output_arrives_in_bursts_and_the_burst_gap_is_the_cadence() -> None:
    state = JobDetectorState(JOB, DEFAULT)
    state.observe(status(0.0))
    it = 0
    for burst in range(4):  # 20 lines written 10 s apart, flushed every 200 s
        read = 100.0 + 200.0 * burst
        for k in range(20):
            it += 1
            report(state, read - 200.0 + 10.0 * k, it, read=read)
    assert state.cadence.interval_s == 200.0
    assert state.check(700.0 + 5 * 200.0 + 59.0) == ()


def test_an_announced_checkpoint_write_extends_the_window_and_is_not_a_cadence_sample() -> None:
    state, last = megatron_job()
    state.observe(CheckpointSaved(last + 1.0, JOB, 1000, in_progress=True, received=last + 1.0))
    threshold = hang_threshold(120.0, DEFAULT)
    assert state.check(last + threshold + 600.0) == (), "checkpoint_cap_s: 30 min by default"
    state.observe(CheckpointSaved(last + 1500.0, JOB, 1000, received=last + 1500.0))
    report(state, last + 1560.0, 1100, read=last + 1560.0)
    assert state.cadence.interval_s == 120.0, "the write's long interval is left out"


def test_a_gloo_timeout_still_cuts_the_wait_short_with_real_defaults() -> None:
    state, last = megatron_job()
    timeout = Event(
        signature="gloo.timed_out_waiting",
        category=Category.UNKNOWN,
        kind=Kind.HANG,
        role=Role.CASCADE,
        line=7,
        text="RuntimeError: Timed out waiting 1800000ms for recv operation to complete",
        rank=1,
    )
    state.observe_event(timeout, last + 30.0)
    (hang,) = state.check(last + 30.0)
    assert hang.trigger is Trigger.COMM_TIMEOUT and hang.since == last
