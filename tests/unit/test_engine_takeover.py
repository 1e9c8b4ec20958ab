"""A service that starts (or takes the lead) while the job is already in a new attempt reads
the old attempt's last lines again (the stored log offsets lag a few cycles): those reports
are not the new attempt's progress, or its silence while it starts would read as a hang."""

from __future__ import annotations

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.engine.engine import EndedAttempt, Engine, Finding
from trainmedic.core.engine.track import REQUEUE_GRACE_S
from trainmedic.core.model import Kind
from trainmedic.core.observations import CheckpointSaved, JobStatus, NodeStatus, Progress
from trainmedic.core.states import JobState, NodeState


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


def _resumed_after_a_requeue(died: frozenset[str] = frozenset()) -> Engine:
    """The store said attempt 1 runs on n3+n4 (since 100 s), and attempt 0 on n1+n2 was
    replaced at 99 s: Slurm requeued the job by itself when a node died."""
    engine = Engine(SMALL_JOB, settle_s=0.5)
    lost = EndedAttempt(0, ("n1", "n2"), 99.0, died)
    engine.resume("j", 1, 100.0, ("n3", "n4"), previous=lost)
    engine.observe(JobStatus(101.0, "j", JobState.RUNNING, ("n3", "n4"), 1), 101.0)
    return engine


def _node_down(engine: Engine, at: float) -> list[Finding]:
    """The findings about the lost attempt once n2 is seen DOWN at ``at``."""
    engine.observe(NodeStatus(at, "n2", NodeState.DOWN, "Not responding"), at)
    found = [f for t in (at + 1.0, at + 6.0) for f in engine.evaluate(t)]
    return [f for f in found if f.attempt == 0]


def test_a_resumed_engine_blames_the_lost_attempts_dead_node_on_that_attempt() -> None:
    (finding,) = _node_down(_resumed_after_a_requeue(), 102.0)
    assert finding.attempt == 0
    assert finding.verdict.implicated.nodes == ("n2",)
    assert finding.nodes == ("n1", "n2")


def test_a_resumed_engine_leaves_a_node_death_an_incident_holds_or_long_past() -> None:
    assert _node_down(_resumed_after_a_requeue(frozenset({"n2"})), 102.0) == []
    assert _node_down(_resumed_after_a_requeue(), 99.0 + REQUEUE_GRACE_S + 5.0) == []


def test_a_resumed_engine_does_not_take_the_lost_attempts_reports_read_again() -> None:
    """The store says attempt 1 runs; the log is read again from an offset held back before
    attempt 0 ended: its last reports are not attempt 1's progress."""
    engine = Engine(SMALL_JOB, settle_s=0.5)
    engine.resume("j", 1, 100.0, ("n3", "n4"), met_at=110.0)
    engine.observe(JobStatus(110.0, "j", JobState.RUNNING, ("n3", "n4"), 1), 110.0)
    engine.observe_all(_reports(80.0, range(5, 10), received=110.1), 110.1)
    assert engine.progress_of("j") == (None, None)
    engine.observe_all(_reports(111.0, range(20, 22), received=111.5), 111.5)
    first, _ = engine.progress_of("j")
    assert first is not None and first.iteration == 20
