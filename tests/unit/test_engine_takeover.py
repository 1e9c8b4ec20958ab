"""A service that starts (or takes the lead) while the job is already in a new attempt reads
the old attempt's last lines again (the stored log offsets lag a few cycles): those reports
are not the new attempt's progress, or its silence while it starts would read as a hang."""

from __future__ import annotations

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.engine.engine import Engine
from trainmedic.core.model import Kind
from trainmedic.core.observations import CheckpointSaved, JobStatus, Progress
from trainmedic.core.states import JobState


def _reports(t0: float, iterations: range, received: float) -> list[Progress]:
    """Attempt 0's reports printed from ``t0``, 0.1 s apart, all read at ``received``."""
    return [
        Progress(t0 + 0.1 * k, "j", i, rank, received=received)
        for k, i in enumerate(iterations)
        for rank in range(2)
    ]


def _taken_over(at: float) -> Engine:
    """The store said attempt 0 (started at 0 s); the scheduler now shows attempt 1 running,
    started while no service watched it."""
    engine = Engine(SMALL_JOB, settle_s=0.5)
    engine.resume("j", 0, 0.0, ("n1", "n2"))
    engine.observe(JobStatus(at, "j", JobState.RUNNING, ("n3", "n4"), 1), at)
    return engine


def test_the_old_attempts_reports_read_again_are_not_the_new_attempts_progress() -> None:
    engine = _taken_over(100.0)
    engine.observe_all(_reports(40.0, range(100, 160), received=100.1), 100.1)
    engine.observe(CheckpointSaved(45.0, "j", 150, received=100.1), 100.1)
    assert engine.progress_of("j") == (None, None)
    # a slow start: 30 s without a report is within the start-up grace, not a hang (it
    # was one 10 s after the takeover, measured from the old reports read again)
    findings = [f for t in (110.0, 111.0, 130.0, 131.0) for f in engine.evaluate(t)]
    assert [f for f in findings if f.verdict.kind is Kind.HANG] == []


def test_the_new_attempts_own_reports_count_at_once() -> None:
    engine = _taken_over(100.0)
    engine.observe_all(_reports(95.0, range(150, 160), received=100.1), 100.1)
    first, last = engine.progress_of("j")
    assert first is not None and last is not None and last.iteration == 159


def test_reports_read_later_count_whatever_time_they_print() -> None:
    """A workload whose clock runs behind: once the backlog is read, its reports count."""
    engine = _taken_over(100.0)
    engine.observe_all(_reports(20.0, range(1, 10), received=140.0), 140.0)
    assert engine.progress_of("j")[1] is not None


def test_an_attempt_seen_starting_keeps_every_report() -> None:
    engine = Engine(SMALL_JOB, settle_s=0.5)
    engine.watch("j")
    engine.observe(JobStatus(0.0, "j", JobState.RUNNING, ("n1", "n2"), 0), 0.0)
    engine.observe(JobStatus(100.0, "j", JobState.RUNNING, ("n3", "n4"), 1), 100.0)
    engine.observe_all(_reports(50.0, range(1, 10), received=100.1), 100.1)
    assert engine.progress_of("j")[1] is not None
