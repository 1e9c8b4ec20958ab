"""The second-opinion replay: first-sight rows, a classifier of the earlier batches only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.cli.main import main
from trainmedic.offline.first_sight import Scored
from trainmedic.offline.second_opinion import format_replay, replay, second_opinion
from trainmedic.offline.train_evidence import build, load_corpus

LOGS = {
    "storage": ["nfs: server fs01 not responding, still trying", "nfs server timed out"],
    "gpu_hardware": ["NVRM: Xid 79, GPU has fallen off the bus", "Xid 48 double bit ECC error"],
    "none": ["epoch 3 loss 0.12 step 400 done", "epoch 4 loss 0.11 step 500 saved"],
}


def _batch(root: Path, name: str, rows: list[tuple[str, str, str, float]]) -> None:
    """A batch: per row (file, label, first-sight prediction, its confidence)."""
    d = root / name
    d.mkdir(parents=True)
    labels, table = [], ["  file  label  predicted  conf  kind  label conf"]
    for file, label, predicted, conf in rows:
        (d / file).write_text("\n".join(LOGS[label]) + "\n")
        labels.append(json.dumps({"file": file, "category": label, "confidence": "high"}))
        mark = " " if label == predicted else "x"
        table.append(f"{mark} {file}  {label}  {predicted}  {conf:.2f}  crash->crash  high")
    (d / "labels.jsonl").write_text("\n".join(labels) + "\n")
    (d / "FIRST_SIGHT_abc.txt").write_text("\n".join(table) + "\n")


def _tree(root: Path) -> None:
    for i in (1, 2, 3):
        _batch(
            root,
            f"batch0{i}",
            [
                ("a.log", "storage", "storage", 0.8),
                ("b.log", "gpu_hardware", "gpu_hardware", 0.8),
                ("c.log", "none", "none", 0.0),
            ],
        )
    # The new batch: a storage log the rules only guessed as the application, one they were
    # sure of (wrongly), and one they guessed right.
    _batch(
        root,
        "batch04",
        [
            ("a.log", "storage", "application", 0.45),
            ("b.log", "storage", "network_hardware", 0.8),
            ("c.log", "gpu_hardware", "gpu_hardware", 0.3),
        ],
    )
    index = "\n".join(f'batch0{i} = "FIRST_SIGHT_abc.txt"' for i in (1, 2, 3, 4))
    (root / "first_sight.toml").write_text(index + "\n")


def test_only_guesses_are_overruled_by_a_model_of_earlier_batches(tmp_path: Path) -> None:
    _tree(tmp_path)
    rows = replay(tmp_path, min_prior=3)
    assert [r.batch for r in rows] == ["batch04"] * 3
    assert [r.second for r in rows] == ["storage", "network_hardware", "gpu_hardware"]
    text = format_replay(rows)
    assert any(ln.split() == ["batch04", "1", "->", "2", "of", "3"] for ln in text.splitlines())
    assert "overruled 1: the guess was right 0, the second opinion right 1" in text


def test_batches_without_enough_before_them_are_not_replayed(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert replay(tmp_path, min_prior=4) == []
    assert {r.batch for r in replay(tmp_path, min_prior=1)} == {"batch02", "batch03", "batch04"}


def test_healthy_unknown_and_unscored_rows_stand(tmp_path: Path) -> None:
    _tree(tmp_path)
    model = build([log for i in (1, 2, 3) for log in load_corpus(tmp_path / f"batch0{i}")])
    lines = LOGS["storage"]
    for predicted, conf in (("none", 0.0), ("unknown", 0.2), ("application", None)):
        row = Scored("x.log", "storage", predicted, conf, "high")
        assert second_opinion(row, lines, model) == predicted
    assert second_opinion(Scored("x.log", "storage", "application", 0.4, "high"), lines, model) == (
        "storage"
    )


def test_the_cli_prints_the_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tree(tmp_path)
    # The CLI replays from MIN_PRIOR (10) batches on: four batches give an empty replay.
    assert main(["eval", "--replay-second-opinion", str(tmp_path)]) == 0
    assert "pooled" in capsys.readouterr().out
