"""The engine on synthetic observations: pure, no clock, no I/O."""

from __future__ import annotations

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.engine.engine import Engine
from trainmedic.core.model import Category, EvidenceSource, Kind
from trainmedic.core.observations import JobStatus, LogLine, NodeStatus, Progress
from trainmedic.core.states import JobState, NodeState

XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=991, name=python, GPU has fallen off the bus."


def _running(
    engine: Engine, t: float, attempt: int = 0, nodes: tuple[str, ...] = ("n1", "n2")
) -> None:
    engine.observe(JobStatus(t, "j", JobState.RUNNING, nodes, attempt), t)


def _progress(engine: Engine, t0: float, iterations: range, step: float = 0.1) -> float:
    t = t0
    for i in iterations:
        t = t0 + (i - iterations.start) * step
        for rank in range(4):
            engine.observe(
                Progress(t, "j", i, rank, "n1" if rank < 2 else "n2", step, 0.05, 0.04), t
            )
    return t


def _engine() -> Engine:
    engine = Engine(SMALL_JOB, settle_s=0.5)
    engine.watch("j")
    return engine


def test_kernel_xid_on_a_job_node_becomes_a_gpu_hardware_finding_after_settling() -> None:
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    kernel = LogLine(
        t + 0.1, f"kernel: {XID79}", EvidenceSource.KERNEL_LOG, "kern.log", 7, node="n2"
    )
    engine.observe(kernel, t + 0.1)
    assert engine.evaluate(t + 0.2) == []  # still settling: trailing lines may follow
    assert engine.settling and engine.settles("j") and not engine.settles("other")
    (finding,) = engine.evaluate(t + 0.7)
    assert not engine.settling and not engine.settles("j")
    assert finding.verdict.kind is Kind.CRASH
    assert finding.verdict.category is Category.GPU_HARDWARE
    assert finding.verdict.implicated.nodes == ("n2",)
    assert finding.verdict.root_cause is not None
    assert finding.verdict.root_cause.evidence is EvidenceSource.KERNEL_LOG
    assert finding.anomaly.detected_at == t + 0.1
    assert engine.evaluate(t + 2.0) == []  # reported once


def test_xid_on_another_node_is_not_this_jobs_problem() -> None:
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    kernel = LogLine(t, XID79, EvidenceSource.KERNEL_LOG, "kern.log", 1, node="n4")
    engine.observe(kernel, t)
    assert engine.evaluate(t + 1.0) == []


def test_no_progress_is_a_hang_with_unknown_cause() -> None:
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    assert engine.evaluate(t + 3.0) == []
    (finding,) = engine.evaluate(t + 6.0) or engine.evaluate(t + 6.6)
    assert finding.verdict.kind is Kind.HANG
    assert finding.verdict.category is Category.UNKNOWN


def test_lines_of_an_earlier_attempt_are_not_evidence() -> None:
    engine = _engine()
    _running(engine, 0.0, attempt=1)
    app = EvidenceSource.APP_LOG
    old = [
        "==== 2026-11-29T09:00:00.000Z trainmedic-local job=j attempt=0 nodes=n1,n2 starting ====",
        "[rank1]: KeyError: 'decoder.layers.12.weight'",
    ]
    for n, text in enumerate(old, 1):
        engine.observe(LogLine(1.0, text, app, "job.out", n, job_id="j"), 1.0)
    _progress(engine, 2.0, range(1, 30))
    assert engine.evaluate(6.0) == []


def test_node_down_after_the_scheduler_requeued_the_job_is_node_hardware() -> None:
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    # Slurm requeues a --requeue job itself: the dead node is gone from the job already.
    engine.observe(JobStatus(t + 0.1, "j", JobState.PENDING, (), 1), t + 0.1)
    engine.observe(NodeStatus(t + 0.1, "n2", NodeState.DOWN, "test"), t + 0.1)
    engine.observe(NodeStatus(t + 0.3, "n2", NodeState.DOWN, "test"), t + 0.3)  # no news
    (finding,) = engine.evaluate(t + 1.0)
    assert finding.attempt == 0
    assert finding.verdict.category is Category.NODE_HARDWARE
    assert finding.verdict.implicated.nodes == ("n2",)
    assert engine.evaluate(t + 2.0) == []


def test_an_xid_explains_one_incident_not_the_next_one_on_the_same_node() -> None:
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    kernel = LogLine(t, f"kernel: {XID79}", EvidenceSource.KERNEL_LOG, "kern.log", 7, node="n2")
    engine.observe(kernel, t)
    (first,) = engine.evaluate(t + 1.0)
    assert first.verdict.category is Category.GPU_HARDWARE
    # Restarted in place (monitor mode: nobody excluded n2), then it hangs.
    _running(engine, t + 2.0, attempt=1)
    t2 = _progress(engine, t + 3.0, range(40, 80))
    (second,) = engine.evaluate(t2 + 6.0) or engine.evaluate(t2 + 6.6)
    assert second.verdict.kind is Kind.HANG
    assert second.verdict.category is Category.UNKNOWN


def test_the_lost_attempts_last_progress_lines_do_not_count_for_the_new_one() -> None:
    engine = _engine()
    app = EvidenceSource.APP_LOG
    engine.observe(LogLine(0.0, "[rank0] trainer start attempt=0", app, "o", 1, job_id="j"), 0.0)
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    # Slurm requeued the job (node death): the old ranks still print a few lines.
    engine.observe(JobStatus(t + 0.1, "j", JobState.PENDING, (), 1), t + 0.1)
    _progress(engine, t + 0.2, range(40, 43))
    assert engine.detector("j").iteration is None  # nothing of attempt 1 yet
    engine.observe(
        LogLine(t + 5, "[rank0] trainer start attempt=1", app, "o", 99, job_id="j"), t + 5
    )
    _progress(engine, t + 6, range(30, 33))
    assert engine.detector("j").iteration == 32


def test_a_bar_flushed_by_the_killed_attempt_is_not_the_next_attempts_progress() -> None:
    """Read after the requeue (no banner in this log): the next attempt still gets its
    start-up grace, not the cadence threshold counted from that line."""
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    engine.observe(JobStatus(t + 0.1, "j", JobState.PENDING, (), 1), t + 0.1)
    _progress(engine, t + 0.2, range(40, 41))
    _running(engine, t + 10.0, attempt=1)
    assert engine.progress_of("j") == (None, None)
    assert engine.detector("j").last_progress is None
    assert engine.evaluate(t + 10.0 + SMALL_JOB.startup_grace_s - 1.0) == []


def test_a_node_dropped_from_a_running_job_before_the_requeue_is_still_the_jobs() -> None:
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    # Slurm's poll shows the job still RUNNING but without the dead node, then the node DOWN.
    engine.observe(JobStatus(t + 0.1, "j", JobState.RUNNING, ("n1",), 0), t + 0.1)
    engine.observe(NodeStatus(t + 0.1, "n2", NodeState.DOWN, "test"), t + 0.1)
    (finding,) = engine.evaluate(t + 1.0)
    assert finding.verdict.category is Category.NODE_HARDWARE
    assert finding.verdict.implicated.nodes == ("n2",)


def test_a_restarted_engine_resumed_from_the_stored_attempt_reaches_the_same_verdict() -> None:
    # The service died after the Xid and the crash; restarted, it finds the job FAILED (no
    # longer running on its nodes) and re-reads the kernel log from its start.
    kernel = LogLine(14.0, f"kernel: {XID79}", EvidenceSource.KERNEL_LOG, "kern.log", 3, node="n2")
    failed = JobStatus(20.0, "j", JobState.FAILED, ("n1", "n2"), 0, exit_code=1)

    fresh = _engine()
    fresh.observe_all([failed, kernel], 20.0)
    (blind,) = fresh.evaluate(21.0)
    assert blind.verdict.category is not Category.GPU_HARDWARE  # what the restart used to see

    resumed = Engine(SMALL_JOB, settle_s=0.5)
    resumed.resume("j", 0, 10.0, ("n1", "n2"))
    resumed.observe_all([failed, kernel], 20.0)
    (finding,) = resumed.evaluate(21.0)
    assert finding.attempt == 0
    assert finding.verdict.category is Category.GPU_HARDWARE
    assert finding.verdict.implicated.nodes == ("n2",)


def test_resume_leaves_an_engine_the_scheduler_already_fed_alone() -> None:
    engine = _engine()
    _running(engine, 0.0, attempt=2, nodes=("n3", "n4"))
    engine.resume("j", 1, 0.0, ("n1", "n2"))
    assert engine.detector("j").attempt == 2


def test_a_node_death_survives_slurms_requeue_arriving_before_it_settled() -> None:
    # A loaded service: one poll shows the node DOWN with the job still running, the next
    # (within the settle time) already shows Slurm's own requeue.
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    engine.observe(NodeStatus(t + 0.1, "n2", NodeState.DOWN, "test"), t + 0.1)
    assert engine.evaluate(t + 0.2) == []
    engine.observe(JobStatus(t + 0.3, "j", JobState.PENDING, (), 1), t + 0.3)
    (finding,) = engine.evaluate(t + 1.0)
    assert finding.attempt == 0
    assert finding.verdict.category is Category.NODE_HARDWARE
    assert finding.verdict.implicated.nodes == ("n2",)


def test_a_node_death_while_slurm_winds_the_attempt_down_is_the_attempts() -> None:
    engine = _engine()
    _running(engine, 0.0)
    t = _progress(engine, 1.0, range(1, 40))
    engine.observe(JobStatus(t + 0.1, "j", JobState.COMPLETING, ("n1", "n2"), 0), t + 0.1)
    engine.observe(NodeStatus(t + 0.1, "n2", NodeState.DOWN, "test"), t + 0.1)
    engine.observe(JobStatus(t + 0.5, "j", JobState.PENDING, (), 1), t + 0.5)
    (finding,) = engine.evaluate(t + 1.0)
    assert (finding.attempt, finding.verdict.category) == (0, Category.NODE_HARDWARE)
