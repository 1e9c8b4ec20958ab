"""Attribution on the private generalisation set (tests/data/genset).

The set holds logs written for this test in the formats real tools print (NCCL, torch, CUDA,
the kernel, Slurm/PBS/LSF, DeepSpeed, Megatron, HF, Lightning), one failure mechanism each,
with realistic noise: healthy iterations, NCCL INFO chatter, cascaded timeouts on innocent
ranks, torchrun failure tables that blame a SIGTERM victim. Labels follow the dev corpus
format (labels.jsonl). The floor sits a little under what attribution reaches today, so a
change that loses a mechanism fails here and names the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.core.model import Category
from trainmedic.offline.evaluate import Summary, evaluate, format_summary, read_labels, summary

GENSET = Path(__file__).resolve().parents[1] / "data" / "genset"
FLOOR = 0.95
"""Category accuracy on high+medium labels (72/72 measured when the set was written)."""


@pytest.fixture(scope="module")
def genset() -> Summary:
    return summary(evaluate(GENSET, read_labels(GENSET)))


def test_genset_labels_are_well_formed() -> None:
    labels = read_labels(GENSET)
    assert len(labels) >= 25
    assert len({label.file for label in labels}) == len(labels)
    categories = {str(c) for c in Category}
    for label in labels:
        assert (GENSET / label.file).is_file(), label.file
        assert label.category in categories, label
        assert label.confidence in ("high", "medium", "low"), label
    for line in (GENSET / "labels.jsonl").read_text().splitlines():
        assert {"file", "source_url", "category", "failure_kind", "implicated"} <= set(
            json.loads(line)
        )


def test_genset_category_accuracy_floor(genset: Summary) -> None:
    data = genset
    hit, total = data.high_medium
    assert total > 0
    wrong = [
        f"{o.label.file}: label {o.label.category}, predicted {o.category}"
        for o in data.outcomes
        if not o.category_ok
    ]
    assert hit / total >= FLOOR, "\n".join([*wrong, format_summary(data)])


@pytest.mark.parametrize(
    "category",
    [
        "gpu_hardware",
        "network_hardware",
        "node_hardware",
        "system_software",
        "storage",
        "application",
        "scheduler",
    ],
)
def test_genset_every_category_mostly_right(genset: Summary, category: str) -> None:
    """No category may collapse into another even while the overall floor still holds."""
    data = genset
    hit, total = data.per_category[category]
    assert total >= 2
    assert hit / total >= 0.75, format_summary(data)
