"""Runs of plain progress lines (``ProgressRun``) decide exactly what the per-line path does.

The same bytes, appended to job logs in the same polls, go through ``JobLogSource`` line by
line (``runs=False``) and as runs (``runs=True``, what the service uses) into an ``Engine``;
every finding, the stored progress after each poll, the detector's state (step windows,
cadence, hang and straggler inputs), the scans attribution reads and the source's counters
must be equal. Inputs: every recorded log under tests/data, the example trainer's own line
format (``demo.trainer.rank_log``) in healthy, straggling, NaN and crashing runs, and
generated mixes of plain and other lines cut at arbitrary byte boundaries.
"""

from __future__ import annotations

import shutil
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmedic.core.engine.engine import Engine, Finding
from trainmedic.core.observations import JobStatus, ProgressRun
from trainmedic.core.states import JobState
from trainmedic.core.timestamps import iso_ms
from trainmedic.demo.trainer.rank_log import StepReport, format_progress
from trainmedic.sources.joblog import JobLogSource
from trainmedic.sources.offsets import OffsetBook

DATA = Path(__file__).resolve().parents[1] / "data"
T0 = 1_795_000_000.0
JOB = "j1"

Poll = dict[str, bytes]  # file name -> bytes appended before the poll


def _plain(value: Any) -> Any:
    """Detector state as comparable values (deques as lists, objects as their fields)."""
    if isinstance(value, deque | list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: _plain(v) for k, v in vars(value).items() if k != "config"}
    if hasattr(value, "__slots__") and not hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__slots__}
    return value


def _live(tmp: Path, polls: Sequence[Poll], *, runs: bool, backlog: bool) -> dict[str, Any]:
    now = [T0]
    names = sorted({name for poll in polls for name in poll})
    # The same paths for both reads (the scans and the evidence name them).
    shutil.rmtree(tmp / "logs", ignore_errors=True)
    paths = {name: tmp / "logs" / name for name in names}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    # backlog: what the first poll finds is a file's backlog (written before it was followed)
    book = OffsetBook([], lookback_s=120.0, clock=lambda: now[0]) if backlog else None
    logs = [str(p) for p in paths.values()]
    source = JobLogSource(JOB, logs, clock=lambda: now[0], runs=runs, book=book)
    engine = Engine()
    engine.watch(JOB)
    engine.observe(JobStatus(T0, JOB, JobState.RUNNING, ("n0", "n1"), attempt=1), T0)
    findings: list[Finding] = []
    progress = []
    was_run = 0
    for poll in polls:
        for name, data in poll.items():
            with paths[name].open("ab") as f:
                f.write(data)
        now[0] += 0.5
        observations = source.poll()
        was_run += sum(isinstance(o, ProgressRun) for o in observations)
        engine.observe_all(observations, now[0])
        findings.extend(engine.evaluate(now[0]))
        progress.append(engine.progress_of(JOB))
    for _ in range(30):  # quiet: settle what is pending, let the hang clock run
        now[0] += 1.0
        engine.observe_all(source.poll(), now[0])
        findings.extend(engine.evaluate(now[0]))
    track = engine._jobs[JOB]
    scans = track.scans()
    source.close()
    return {
        "findings": [_finding(f) for f in findings],
        "progress": progress,
        "detector": _plain(engine.detector(JOB)),
        "scans": scans,
        "counts": (source.lines_read, source.progress_lines),
        "bar": track.bar._last,
        "runs": was_run,
    }


def _finding(finding: Finding) -> tuple[Any, ...]:
    verdict = finding.verdict
    return (
        finding.anomaly.kind,
        finding.anomaly.trigger,
        finding.anomaly.basis,
        finding.iteration,
        verdict.kind,
        verdict.category,
        verdict.implicated,
        verdict.confidence,
        finding.evidence,
    )


def assert_same(tmp: Path, polls: Sequence[Poll], *, backlog: bool = False) -> dict[str, Any]:
    by_line = _live(tmp, polls, runs=False, backlog=backlog)
    by_run = _live(tmp, polls, runs=True, backlog=backlog)
    assert by_line.pop("runs") == 0
    runs = by_run.pop("runs")
    for key in by_line:
        # repr: a NaN loss is equal to itself only as text
        assert repr(by_run[key]) == repr(by_line[key]), key
    by_run["runs"] = runs
    return by_run


def _cut(data: bytes, sizes: Sequence[int]) -> list[bytes]:
    out, at = [], 0
    for size in sizes:
        out.append(data[at : at + size])
        at += size
    out.append(data[at:])
    return [piece for piece in out if piece]


def _trainer_lines(
    rank: int,
    node: str,
    steps: range,
    *,
    slow_from: int | None = None,
    nan_at: int | None = None,
    crash_at: int | None = None,
) -> list[str]:
    lines = [f"{iso_ms(T0)} [rank{rank}] node={node} trainer start attempt=1"]
    for i in steps:
        t = T0 + 1.0 + 0.2 * i
        step_s = 0.2 if slow_from is None or i < slow_from else 1.4
        compute = 0.15 if slow_from is None or i < slow_from or rank != 1 else 1.3
        loss = float("nan") if i == nan_at else 2.0 / (1 + i)
        report = StepReport(i, loss, step_s, compute, step_s - compute, 64 / step_s)
        lines.append(f"{iso_ms(t)} [rank{rank}] node={node} {format_progress(report)}")
        if i == crash_at:
            head = f"{iso_ms(t)} [rank{rank}] node={node} "
            lines += [
                head + "Traceback (most recent call last):",
                head + '  File "/app/train.py", line 88, in <module>',
                head + "RuntimeError: CUDA error: an illegal memory access was encountered",
            ]
            break
    return lines


def _polls_of(files: dict[str, list[str]], per_poll: int) -> list[Poll]:
    """Each file's lines, ``per_poll`` lines of each file per poll."""
    polls: list[Poll] = []
    longest = max(len(lines) for lines in files.values())
    for at in range(0, longest, per_poll):
        polls.append(
            {
                name: "".join(line + "\n" for line in lines[at : at + per_poll]).encode()
                for name, lines in files.items()
                if lines[at : at + per_poll]
            }
        )
    return polls


def test_the_trainers_healthy_output_is_read_as_runs_to_the_same_state(tmp_path: Path) -> None:
    files = {f"r{r}.log": _trainer_lines(r, f"node{r}", range(1, 400)) for r in range(2)}
    result = assert_same(tmp_path, _polls_of(files, 7))
    assert result["runs"] > 50  # the fast path was taken
    assert result["counts"] == (800, 798)


def test_a_backlog_is_read_as_runs_to_the_same_state(tmp_path: Path) -> None:
    files = {f"r{r}.log": _trainer_lines(r, f"node{r}", range(1, 400)) for r in range(2)}
    polls = _polls_of(files, 7)
    first = {name: b"".join(p.get(name, b"") for p in polls[:30]) for name in files}
    result = assert_same(tmp_path, [first, *polls[30:]], backlog=True)
    assert result["runs"] > 40


def test_a_straggling_rank_is_found_alike(tmp_path: Path) -> None:
    files = {
        f"r{r}.log": _trainer_lines(r, f"node{r}", range(1, 600), slow_from=300) for r in range(2)
    }
    result = assert_same(tmp_path, _polls_of(files, 11))
    assert result["runs"] > 50
    assert result["findings"], "the straggler is found by both paths"


def test_a_nan_loss_and_a_crash_are_found_alike(tmp_path: Path) -> None:
    files = {
        "r0.log": _trainer_lines(0, "node0", range(1, 300), nan_at=250),
        "r1.log": _trainer_lines(1, "node1", range(1, 300), crash_at=200),
    }
    result = assert_same(tmp_path, _polls_of(files, 13))
    assert result["findings"]


def test_a_hang_is_found_alike(tmp_path: Path) -> None:
    files = {f"r{r}.log": _trainer_lines(r, f"n{r}", range(1, 120)) for r in range(2)}
    polls = _polls_of(files, 5) + [{} for _ in range(800)]  # then 400 s of silence
    result = assert_same(tmp_path, polls)
    assert any(f[0].value == "hang" for f in result["findings"])


def test_every_recorded_log_is_read_alike(tmp_path: Path) -> None:
    logs = sorted(
        p
        for p in DATA.rglob("*")
        if p.is_file() and p.suffix in (".log", ".out", ".err", ".txt") and p.stat().st_size
    )
    assert len(logs) > 20
    for i, log in enumerate(logs):
        data = log.read_bytes()[:200_000]
        polls: list[Poll] = [{"a.log": piece} for piece in _cut(data, [4096] * 60)]
        assert_same(tmp_path / str(i), polls)


_NODES = ("n0", "node2", "gpu-a1", "error7", "ckpt1", "NCCLx", "r.dot_1")


@st.composite
def _mixed_log(draw: st.DrawFn) -> list[Poll]:
    """Two ranks' logs: mostly plain trainer lines (some kinds the general path must keep:
    odd node names, a NaN loss, a short line), and errors, tracebacks, checkpoints, restart
    banners, blank and carriage-return lines among them; cut into polls anywhere."""
    files: dict[str, list[str]] = {"r0.log": [], "r1.log": []}
    iteration = draw(st.integers(0, 50))
    t = T0 + draw(st.floats(-400.0, 5.0))
    for _ in range(draw(st.integers(1, 160))):
        name = draw(st.sampled_from(sorted(files)))
        rank = int(name[1])
        node = draw(st.sampled_from(_NODES))
        t += draw(st.sampled_from([0.0, 0.01, 0.2, 3.0]))
        iteration += draw(st.sampled_from([0, 1, 1, 1, 2, -3]))
        head = f"{iso_ms(t)} [rank{rank}] node={node} "
        kind = draw(st.integers(0, 14))
        loss = draw(st.sampled_from(["0.5", "1.25000", "0.0", "nan", "3"]))
        if kind <= 6:
            extra = draw(
                st.sampled_from(
                    ["", " compute_s=0.10000 wait_s=0.02000", " samples_per_s=12.5", " x=1"]
                )
            )
            line = f"{head}iter={max(0, iteration)} loss={loss} step_s=0.20000{extra}"
        elif kind == 7:
            line = head + "RuntimeError: CUDA error: an illegal memory access was encountered"
        elif kind == 8:
            line = head + "Traceback (most recent call last):\n" + head + "ValueError: boom"
        elif kind == 9:
            line = f"{head}checkpoint saved iter={iteration} path=/ckpt/{iteration}"
        elif kind == 10:
            line = f"{head}checkpoint begin iter={iteration}"
        elif kind == 11:
            line = f"{head}trainer start attempt={draw(st.integers(1, 3))}"
        elif kind == 12:
            line = f"{head}NCCL WARN Call to ibv_reg_mr failed"
        elif kind == 13:
            line = ""
        else:
            line = f"{head}iter={iteration} loss={loss} step_s=0.2\r{head}progress 50%"
        files[name].append(line)
    polls: list[Poll] = []
    for name, lines in files.items():
        data = "".join(line + "\n" for line in lines).encode()
        sizes = draw(st.lists(st.integers(1, 4000), max_size=12))
        for i, piece in enumerate(_cut(data, sizes)):
            while len(polls) <= i:
                polls.append({})
            polls[i][name] = piece
    return polls


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(polls=_mixed_log(), backlog=st.booleans())
def test_generated_mixes_are_read_alike(
    tmp_path_factory: Any, polls: list[Poll], backlog: bool
) -> None:
    assert_same(tmp_path_factory.mktemp("mix"), polls, backlog=backlog)
