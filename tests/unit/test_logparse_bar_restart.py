"""A Lightning job's stdout holds only its bar: a new attempt shows as the bar drawn again from
an earlier position, and ``analyze`` judges the last attempt alone, as the live engine does.

Seen on the lab cluster: the Xid one rank printed into stdout in attempt 2 (glued to a bar
redraw) stayed in the file's only "attempt", and ``analyze`` blamed it for attempt 5's
``RuntimeError`` while the live verdict (one attempt's lines) was the ``RuntimeError``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.logparse.attempts import BarRestart
from trainmedic.core.logparse.scan import scan_lines
from trainmedic.offline.analyze import analyze_path

XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=30048, GPU has fallen off the bus"


def epoch(e: int, n: int, total: int = 200) -> str:
    return f"Epoch {e}:  12%|█▏  | {n}/{total} [00:03<00:20,  9.1it/s, v_num=3, train_loss=0.07]"


def training(n: int) -> str:
    return f"Training: |          | {n}/? [00:00<00:00, 302.95it/s, v_num=4, train_loss=0.07]"


def restarts(lines: list[str]) -> list[bool]:
    bars = BarRestart()
    return [bars.restarts(text) for text in lines]


@pytest.mark.parametrize(
    "lines",
    [
        [epoch(0, n) for n in (1, 2, 200)] + [epoch(1, 1), epoch(1, 1), epoch(2, 5)],
        # resumed from the last batch of epoch 0: the restored batches, then "Epoch 0" again
        [training(199), training(200), epoch(0, 1), epoch(0, 200), epoch(1, 1)],
        [training(101), training(200), epoch(12, 1)],  # resumed mid-epoch
        [training(0), training(0), epoch(0, 0), epoch(0, 1)],  # a first run's first draws
        [epoch(5, 7) + " Validation DataLoader 0: 3/50", "Epoch 3 of 9 done"],  # no bar after
        # every epoch's start: tqdm's reset draws 0 under the old label, then the new label
        [epoch(9, 199), epoch(9, 200), epoch(9, 0), epoch(10, 0), epoch(10, 1)],
        # the restored batches' bar reset as the resumed fit turns to epoch bars
        [training(199), training(200), training(0), epoch(11, 0), epoch(11, 1)],
    ],
)
def test_one_run_of_the_bar_never_restarts(lines: list[str]) -> None:
    assert not any(restarts(lines))


@pytest.mark.parametrize(
    ("lines", "at"),
    [
        ([epoch(7, 47), training(198), training(199)], 1),  # a resumed fit after epoch bars
        ([epoch(4, 6), epoch(3, 1), epoch(3, 2)], 1),  # resumed with the label a lap behind
        ([training(150), training(151), training(101)], 2),  # resumed again, mid-epoch
        # the fit's first, empty draw holds no position: its first counted draw restarts
        ([epoch(7, 47), training(0), training(198)], 2),
    ],
)
def test_a_bar_drawn_again_from_an_earlier_position_is_a_new_run(lines: list[str], at: int) -> None:
    assert restarts(lines) == [i == at for i in range(len(lines))]


def test_a_scan_of_the_bar_file_keeps_the_last_attempt_only(tmp_path: Path) -> None:
    first = [epoch(3, n) for n in range(1, 28)] + [epoch(4, 6) + XID]
    second = [training(198), training(199), training(200)] + [epoch(7, n) for n in range(1, 47)]
    text = "\r".join(first) + "\n" + "\r".join(second) + "\n"
    (tmp_path / "job.out").write_text(text)
    scan = scan_lines([line.encode() for line in text.replace("\r", "\n").splitlines()], "job.out")
    assert not scan.events, scan.events  # the Xid was the first attempt's
    (tmp_path / "job.err").write_text(
        "[rank0]: RuntimeError: shape mismatch in the loss head at step 1650\n"
    )
    verdict = analyze_path(tmp_path).verdict
    assert verdict.root_cause is not None
    assert verdict.root_cause.signature != "nvrm.xid", verdict
    assert verdict.category.value == "application", verdict


def test_a_line_before_an_epoch_boundary_stays_in_its_attempt(tmp_path: Path) -> None:
    """Seen on the lab cluster: rank 3 printed an Xid into stdout glued to a bar redraw two
    steps before the epoch ended; the epoch's reset draw ("Epoch 9: 0/200") read as a new run,
    and ``analyze`` left the Xid out while the live verdict held it."""
    bars = [epoch(9, n) for n in range(190, 199)] + [epoch(9, 199)[:40] + XID]
    after = [epoch(9, 199), epoch(9, 200), epoch(9, 0), epoch(10, 0), epoch(10, 1), epoch(10, 2)]
    text = "\r".join(bars) + "\n" + "\r".join(after) + "\n"
    lines = [line.encode() for line in text.replace("\r", "\n").splitlines()]
    scan = scan_lines(lines, "job.out")
    assert "nvrm.xid" in [e.signature for e in scan.events], scan.events
