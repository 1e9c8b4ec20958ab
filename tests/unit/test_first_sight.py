"""The pooled first-sight figure is read back from the tables recorded when each batch was first
scored, and agrees with each table's own summary line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainmedic.cli.main import main
from trainmedic.offline.evaluate import read_labels
from trainmedic.offline.first_sight import (
    INDEX,
    BatchFirstSight,
    format_first_sight,
    load,
    parse_table,
)

REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld"

TABLE = """\
  file               label             predicted         conf  kind label->predicted   label conf
x r9001.log          scheduler         gpu_hardware      0.29  crash->crash           high
  r9003.log          gpu_hardware      gpu_hardware      0.85  crash->crash           low
  r9007.log          none              none              0.00  none->none             medium

per-category recall (by label):
  gpu_hardware      1/1 = 100.0%
category accuracy, high+medium labels: 1/2 = 50.0%
"""

OLD_TABLE = """\
  file       label             predicted         kind label->predicted   label conf
  r1001.log  gpu_hardware      gpu_hardware      crash->crash           low
x r1002.log  gpu_hardware      unknown           crash->none            medium
"""


def test_rows_are_read_with_and_without_the_confidence_column() -> None:
    rows = parse_table(TABLE)
    assert [(r.file, r.right, r.confidence) for r in rows] == [
        ("r9001.log", False, 0.29),
        ("r9003.log", True, 0.85),
        ("r9007.log", True, 0.0),
    ]
    old = parse_table(OLD_TABLE)
    assert [(r.label, r.predicted, r.confidence) for r in old] == [
        ("gpu_hardware", "gpu_hardware", None),
        ("gpu_hardware", "unknown", None),
    ]


def test_every_batch_has_its_first_sight_recorded() -> None:
    named = {b.batch for b in load(REALWORLD)}
    batches = {p.name for p in REALWORLD.iterdir() if (p / "labels.jsonl").is_file()}
    assert batches == named, "a batch without a first-sight table in first_sight.toml"


@pytest.mark.parametrize("batch", load(REALWORLD), ids=lambda b: b.batch)
def test_each_table_reads_back_as_it_was_printed(batch: BatchFirstSight) -> None:
    text = (REALWORLD / batch.batch / batch.table).read_text(encoding="utf-8")
    m = re.search(r"high\+medium labels: (\d+)/(\d+)", text)
    assert m is not None
    assert batch.high_medium == (int(m[1]), int(m[2]))
    assert len(batch.rows) == len(read_labels(REALWORLD / batch.batch))


def test_the_pooled_report_names_every_batch_and_the_reliability() -> None:
    batches = load(REALWORLD)
    text = format_first_sight(batches)
    for b in batches:
        assert b.batch in text
    assert "pooled" in text and "reliability on unseen logs" in text


def test_the_cli_pools_and_a_directory_without_an_index_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", "--first-sight", str(REALWORLD)]) == 0
    assert "pooled" in capsys.readouterr().out
    assert main(["eval", "--first-sight", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert INDEX in err and len(err.splitlines()) == 1
