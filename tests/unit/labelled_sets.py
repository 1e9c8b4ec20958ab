"""What every labelled set of logs must hold to be scored (the written and reference sets)."""

from __future__ import annotations

import json
from pathlib import Path

from trainmedic.core.model import Category
from trainmedic.offline.evaluate import read_labels

ROW_KEYS = {"file", "source_url", "category", "failure_kind", "implicated"}


def assert_well_formed(corpus: Path, minimum: int, max_lines: int | None = None) -> None:
    """At least ``minimum`` labels, one per file, each file present, known categories and
    confidences, every row with its source (an https address); files of at most
    ``max_lines`` lines when given."""
    labels = read_labels(corpus)
    assert len(labels) >= minimum
    assert len({label.file for label in labels}) == len(labels)
    categories = {*map(str, Category), "none"}
    for label in labels:
        assert (corpus / label.file).is_file(), label.file
        assert label.category in categories, label
        assert label.confidence in ("high", "medium", "low"), label
    for line in (corpus / "labels.jsonl").read_text().splitlines():
        row = json.loads(line)
        assert set(row) >= ROW_KEYS
        assert row["source_url"].startswith("https://"), row
        if max_lines is not None:
            assert 1 <= len((corpus / row["file"]).read_text().splitlines()) <= max_lines
