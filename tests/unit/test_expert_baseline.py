"""The expert's reading of the excerpts is joined with the recorded first-sight rows of the same
logs, counted right, and refused with a one-line message when malformed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.cli.main import main
from trainmedic.core.errors import InputError
from trainmedic.offline.evaluate import read_labels
from trainmedic.offline.expert_baseline import (
    FILE,
    compare,
    expert_section,
    format_comparison,
    load_answers,
)
from trainmedic.offline.first_sight import BatchFirstSight, load, parse_table

REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld"

TABLE = """\
x r9001.log          scheduler         gpu_hardware      0.29  crash->crash           high
  r9002.log          storage           storage           0.45  crash->crash           medium
  r9007.log          none              none              0.00  none->none             medium
"""


def _answer(file: str, category: str, confidence: float) -> str:
    row = {"file": file, "category": category, "failure_kind": "crash"}
    row |= {"confidence": confidence, "reason": "r", "reader": "t"}
    return json.dumps(row)


def _batch() -> BatchFirstSight:
    return BatchFirstSight("batch90", "FIRST_SIGHT_x.txt", parse_table(TABLE))


def test_both_readings_are_counted_on_the_same_logs(tmp_path: Path) -> None:
    path = tmp_path / FILE
    path.write_text(
        "\n".join(
            [
                _answer("batch90/r9001.log", "scheduler", 0.8),  # expert only
                _answer("batch90/r9002.log", "application", 0.4),  # first sight only
                _answer("batch90/r9007.log", "system_software", 0.3),  # healthy, called failed
            ]
        )
        + "\n"
    )
    rows = compare(load_answers(path), [_batch()])
    text = format_comparison(rows)
    assert "expert          1/3" in text and "first sight     2/3" in text
    assert "both right 0, expert only 1, first sight only 2, neither 0" in text
    assert "healthy logs called failures: expert 1/1, first sight 0/1" in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json\n", ":1: not JSON"),
        ('{"file": "batch90/r9001.log"}\n', ":1: expected exactly the keys"),
        (_answer("batch90/r9001.log", "scheduler", 0.5).replace("0.5", '"high"') + "\n", ":1:"),
    ],
)
def test_a_malformed_row_is_refused_with_its_line(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / FILE
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        load_answers(path)


def test_an_answer_for_a_log_no_table_scored_is_refused(tmp_path: Path) -> None:
    path = tmp_path / FILE
    path.write_text(_answer("batch90/r9999.log", "scheduler", 0.5) + "\n")
    with pytest.raises(InputError, match=r"r9999\.log: no first-sight row"):
        compare(load_answers(path), [_batch()])


def test_the_recorded_reading_covers_every_high_medium_log_it_was_given() -> None:
    answers = load_answers(REALWORLD / FILE)
    read = {a.file for a in answers}
    assert len(read) == len(answers)  # one answer per log
    for batch in sorted({f.split("/", 1)[0] for f in read}):
        labels = read_labels(REALWORLD / batch)
        wanted = {f"{batch}/{lab.file}" for lab in labels if lab.confidence in ("high", "medium")}
        assert {f for f in read if f.startswith(batch + "/")} == wanted, batch
    section = expert_section(REALWORLD, load(REALWORLD))
    assert section is not None and f"{len(answers)} high+medium logs" in section


def test_the_cli_prints_the_comparison_beside_the_pooled_figure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["eval", "--first-sight", str(REALWORLD)]) == 0
    out = capsys.readouterr().out
    assert out.index("pooled") < out.index("an expert reading the excerpt alone")
