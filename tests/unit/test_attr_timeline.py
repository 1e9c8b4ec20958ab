"""Time structure as evidence: a stall while the job still ran is a hang, a loss that diverged
is the application (more surely when it repeats after a restart); healthy curves say nothing."""

from __future__ import annotations

from pathlib import Path

from trainmedic.core.attribute.timeline import loss_diverged, stalled_while_running
from trainmedic.core.logparse.timeline import Point, Timeline, TimelineTracker
from trainmedic.core.model import Category, Kind
from trainmedic.offline.analyze import analyze_path


def track(text: str) -> Timeline:
    tracker = TimelineTracker()
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if tracker.is_candidate(line):
            tracker.candidate(n, line)
        if tracker.wants(line):
            tracker.observe(n, line)
    return tracker.timeline(len(lines), "job.log")


PULSES = "".join(
    f"[2022-05-01 0{h}:56:11] PULSE: run-176B is running for 1-0{h}:27:33 since 2022-04-29\n"
    for h in (3, 4, 5)
)


def test_progress_stopped_while_the_job_was_reported_running_is_a_hang() -> None:
    text = " iteration    45000/  115311 | lm loss: 2.113567E+00 |\n" + PULSES
    found = stalled_while_running([track(text)])
    assert found is not None and found.kind is Kind.HANG
    assert found.category is Category.APPLICATION and found.confidence < 0.5


def test_running_reports_with_progress_between_them_are_no_hang() -> None:
    text = "".join(
        f"[2022-05-01 0{h}:56:11] PULSE: run is running for 1-0{h}:27:33\n"
        f"[2022-05-01 0{h}:57:00] iteration {h * 100}/ 1000 | lm loss: 2.0 |\n"
        for h in (3, 4, 5)
    )
    assert stalled_while_running([track(text)]) is None


def test_a_short_gap_is_no_hang() -> None:
    text = (
        "[2022-05-01 03:00:00] iteration 100/1000 | lm loss: 2.0 |\n"
        "[2022-05-01 03:01:00] run is running for 1:00:00\n"
        "[2022-05-01 03:02:00] run is running for 1:01:00\n"
    )
    assert stalled_while_running([track(text)]) is None


def points(*losses: float | None, first: int = 1000, step: int = 10) -> Timeline:
    return Timeline(
        points=tuple(Point(i + 1, first + i * step, loss, None) for i, loss in enumerate(losses))
    )


def test_loss_spike_that_does_not_recover() -> None:
    found = loss_diverged([points(2.66, 2.67, 4.37, 4.40, 4.10)])
    assert found is not None and found.category is Category.APPLICATION
    assert found.confidence < 0.5


def test_healthy_curves_are_not_divergence() -> None:
    assert loss_diverged([points(3.0, 2.5, 2.2, 2.0, 1.9, 1.8)]) is None
    assert loss_diverged([points(2.0, 3.1, 2.0, 1.9, 1.85)]) is None  # recovered spike
    assert loss_diverged([points(2.0, 3.5, 3.4, first=1, step=1)]) is None  # too early


def test_loss_collapse_to_zero() -> None:
    found = loss_diverged([points(6.26, 0.0, 0.0, 0.0, 0.0, first=0, step=0)])
    assert found is not None and "collapsed" in found.basis


def test_divergence_repeating_after_a_restart_is_more_certain() -> None:
    first = [Point(i, 1000 + i * 10, 2.0 if i < 5 else 5.0, None) for i in range(8)]
    again = [Point(20 + i, 1000 + i * 10, 2.0 if i < 5 else 5.0, None) for i in range(8)]
    found = loss_diverged([Timeline(points=tuple(first + again))])
    assert found is not None and found.confidence >= 0.6 and "restart" in found.basis


def test_tracker_keeps_a_bounded_sample_and_the_tail() -> None:
    text = "".join(f"step {i} loss {5.0 - i / 20000:.5f}\n" for i in range(20000))
    timeline = track(text)
    assert len(timeline.points) <= 256 + 64
    assert timeline.points[-1].iteration == 19999


def test_analyze_loss_spike_without_any_error_line(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    rows = [2.70, 2.68, 2.66, 2.67, 4.37, 4.36, 4.40, 4.14]
    path.write_text(
        "".join(
            f" iteration {17060 + i}/  159576 | lm loss: {loss:.6E} | loss scale: 1.0 |\n"
            for i, loss in enumerate(rows)
        )
    )
    verdict = analyze_path(path).verdict
    assert verdict.failure and verdict.category is Category.APPLICATION
    assert verdict.basis.startswith("mechanism (time structure)")
