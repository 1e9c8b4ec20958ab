"""``trainmedic eval`` logic on a tiny labelled corpus written by the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.core.errors import InputError
from trainmedic.offline.evaluate import evaluate, format_summary, read_labels, summary


def corpus(tmp_path: Path) -> Path:
    (tmp_path / "a.log").write_text("OSError: [Errno 116] Stale file handle\n")
    (tmp_path / "b.log").write_text("torch.OutOfMemoryError: CUDA out of memory.\n")
    (tmp_path / "c.log").write_text("all good\n")
    labels = [
        {"file": "a.log", "category": "storage", "failure_kind": "crash", "confidence": "high"},
        {"file": "b.log", "category": "application", "failure_kind": "oom", "confidence": "medium"},
        {
            "file": "c.log",
            "category": "network_hardware",
            "failure_kind": "hang",
            "confidence": "low",
        },
        {
            "file": "missing.log",
            "category": "unknown",
            "failure_kind": "crash",
            "confidence": "low",
        },
    ]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return tmp_path


def test_summary_counts(tmp_path: Path) -> None:
    root = corpus(tmp_path)
    s = summary(evaluate(root, read_labels(root)))
    assert s.high_medium == (2, 2)
    assert s.overall == (2, 4)
    assert s.kind == (2, 4)  # oom counts as a crash
    assert s.per_category["storage"] == (1, 1)
    assert s.confusion["network_hardware"]["none"] == 1
    assert s.confusion["unknown"]["unreadable"] == 1
    text = format_summary(s)
    assert "high+medium labels: 2/2 = 100.0%" in text
    assert json.loads(json.dumps(s.to_json()))["category_accuracy_all"] == [2, 4]


def test_bad_labels(tmp_path: Path) -> None:
    (tmp_path / "labels.jsonl").write_text('{"category": "storage"}\n')
    with pytest.raises(InputError, match="bad label"):
        read_labels(tmp_path)
    with pytest.raises(InputError, match="cannot read labels"):
        read_labels(tmp_path / "nope")
