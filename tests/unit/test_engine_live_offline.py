"""The live engine and ``analyze`` judge the same files alike (real output of a workload).

tests/data/workloads/kvtrainer_app_error holds what tests/workloads/kvtrainer.py printed in
two attempts appended to one job.out / job.err (torchrun, 4 ranks, gloo): rank 1 raises a
RuntimeError at iteration 120 in both; the first attempt trained from 1, the second resumed
from the checkpoint at 100 (``event=resume ... iter=100``). Python's tracebacks, gloo's
"Connection closed by peer" on the other ranks and torchrun's failure table are on stderr.
"""

from __future__ import annotations

from pathlib import Path

from trainmedic.core.engine.engine import Engine, Finding
from trainmedic.core.model import Category, EvidenceSource, Kind
from trainmedic.core.observations import JobStatus, LogLine, Progress
from trainmedic.core.states import JobState
from trainmedic.offline.analyze import analyze_path
from trainmedic.sources.joblog import JobLogSource

DATA = Path(__file__).resolve().parents[1] / "data" / "workloads" / "kvtrainer_app_error"
T0 = 1_800_000_000.0


def _attempt_lines(path: Path, attempt: int) -> str:
    """The lines one attempt appended (the files hold two; the boundaries are known here)."""
    lines = path.read_text().splitlines(keepends=True)
    cut = {"job.out": 486, "job.err": 89}[path.name]
    return "".join(lines[:cut] if attempt == 0 else lines[cut:])


def _live(directory: Path, attempt: int, *, resumed: bool = False) -> tuple[Finding, Engine]:
    """Feed the job's files to an engine as the service does (JobLogSource, the scheduler's
    RUNNING then FAILED) and return its finding. ``resumed``: a service restarted with the
    attempt in its store reads the files from their start."""
    engine = Engine()
    if resumed:
        engine.resume("j", attempt, T0, ("node1",))
    else:
        engine.watch("j")
        engine.observe(JobStatus(T0, "j", JobState.RUNNING, ("node1",), attempt), T0)
    now = T0 + 1.0
    source = JobLogSource("j", [directory / "job.out", directory / "job.err"], clock=lambda: now)
    engine.observe_all(source.poll(), now)
    engine.observe(JobStatus(now + 0.5, "j", JobState.FAILED, ("node1",), attempt, 1), now + 0.5)
    (finding,) = engine.evaluate(now + 2.0)
    return finding, engine


def test_a_deterministic_rank_error_is_application_live_as_offline(tmp_path: Path) -> None:
    for name in ("job.out", "job.err"):
        (tmp_path / name).write_text(_attempt_lines(DATA / name, 0))
    offline = analyze_path(tmp_path).verdict
    finding, _ = _live(tmp_path, 0)
    live = finding.verdict
    assert offline.category is Category.APPLICATION
    assert (live.kind, live.category) == (Kind.CRASH, offline.category)
    assert live.root_cause is not None and offline.root_cause is not None
    assert live.root_cause.signature == offline.root_cause.signature == "py.exception_line"
    assert (live.root_cause.source, live.root_cause.line) == (
        offline.root_cause.source,
        offline.root_cause.line,
    )
    assert "RuntimeError: loss scaler state" in live.root_cause.text
    assert live.confidence == offline.confidence
    # the error message names iteration 120; the last step trained was 119
    assert finding.iteration == 119


def test_a_log_spanning_attempts_is_judged_on_its_last_attempt() -> None:
    offline = analyze_path(DATA)
    err = str(DATA / "job.err")
    assert offline.verdict.root_cause is not None
    assert (offline.verdict.root_cause.source, offline.verdict.root_cause.line) == (err, 99)
    # the resume line (iter=100) is no step: the attempt trained from 101
    assert (offline.progress.first_iteration, offline.progress.last_iteration) == (101, 119)
    # a service restarted in attempt 1 reads both attempts from the files' start
    finding, _ = _live(DATA, 1, resumed=True)
    assert finding.verdict.root_cause is not None
    assert (finding.verdict.root_cause.source, finding.verdict.root_cause.line) == (err, 99)
    assert finding.verdict.category is offline.verdict.category


def test_the_resume_line_is_not_the_attempts_first_progress(tmp_path: Path) -> None:
    for name in ("job.out", "job.err"):
        (tmp_path / name).write_text(_attempt_lines(DATA / name, 1))
    _, engine = _live(tmp_path, 1)
    first, last = engine.progress_of("j")
    assert isinstance(first, Progress) and isinstance(last, Progress)
    assert (first.iteration, last.iteration) == (101, 119)


def test_an_earlier_attempts_fatal_line_read_after_a_service_restart_raises_nothing(
    tmp_path: Path,
) -> None:
    """A service restarted in attempt 1 reads an appended log from its start: the fatal line
    attempt 0 died of, above attempt 1's resume lines, is no anomaly of attempt 1."""
    lines = [f"rank=0 event=step iter={i} loss=0.5 dt_ms=10" for i in range(1, 30)]
    lines.append("[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered")
    lines += [f"rank={r} event=resume ckpt=/c/model_iter000020.pt iter=20" for r in range(2)]
    lines += [f"rank=0 event=step iter={i} loss=0.5 dt_ms=10" for i in range(21, 40)]
    (tmp_path / "job.out").write_text("\n".join(lines) + "\n")
    engine = Engine()
    engine.resume("j", 1, T0, ("node1",))
    engine.observe(JobStatus(T0, "j", JobState.RUNNING, ("node1",), 1), T0)
    now = T0 + 1.0
    engine.observe_all(JobLogSource("j", [tmp_path / "job.out"], clock=lambda: now).poll(), now)
    assert engine.evaluate(now + 1.0) == []
    first, last = engine.progress_of("j")
    assert first is not None and last is not None
    assert (first.iteration, last.iteration) == (21, 39)


def test_a_host_the_failure_table_names_is_no_node_unless_it_is_the_attempts(
    tmp_path: Path,
) -> None:
    """torchrun's table says "host: localhost" (ranks over loopback); the Xid's node is the
    one to exclude, not a host the scheduler does not know."""
    (tmp_path / "job.err").write_text(_attempt_lines(DATA / "job.err", 0))
    engine = Engine()
    engine.watch("j")
    engine.observe(JobStatus(T0, "j", JobState.RUNNING, ("node1", "node2"), 0), T0)
    xid = (
        "kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=991, name=python, GPU has fallen off the bus."
    )
    engine.observe(
        LogLine(T0 + 1, xid, EvidenceSource.KERNEL_LOG, "kern.log", 1, node="node2"), T0 + 1
    )
    now = T0 + 1.5
    engine.observe_all(JobLogSource("j", [tmp_path / "job.err"], clock=lambda: now).poll(), now)
    (finding,) = engine.evaluate(now + 1.0)
    assert finding.verdict.category is Category.GPU_HARDWARE
    assert finding.verdict.implicated.nodes == ("node2",)
    # offline, where no scheduler says which hosts are nodes, the table's host stays named
    (tmp_path / "node2").mkdir()
    (tmp_path / "node2" / "kern.log").write_text(xid + "\n")
    offline = analyze_path(tmp_path).verdict
    assert offline.category is Category.GPU_HARDWARE
    assert offline.implicated.nodes == ("node2", "localhost")
