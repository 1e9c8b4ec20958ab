"""Calibrated confidence and the one policy: a guess (confidence < 0.5) leads to the safe advice,
a restart, never to stop, shrink or drain; ``eval`` reports the reliability table, per-category
recall and the confusion matrix with ``none`` (healthy) as a label."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.core.model import (
    Action,
    Category,
    Event,
    EvidenceSource,
    Implicated,
    Kind,
    Role,
    Verdict,
)
from trainmedic.core.policy import PolicyContext, decide
from trainmedic.core.policy.decide import STOP_CONFIDENCE
from trainmedic.offline.calibration import EDGES, reliability
from trainmedic.offline.evaluate import (
    evaluate_corpora,
    format_summary,
    read_labels,
    summary,
)


def guess(category: Category, *, strong_kernel: bool = False) -> Verdict:
    root = Event(
        signature="evidence.x",
        category=category,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=1,
        text="x",
        node="node2",
        strong=strong_kernel,
        evidence=EvidenceSource.KERNEL_LOG if strong_kernel else EvidenceSource.APP_LOG,
    )
    return Verdict(
        True, Kind.CRASH, category, 0.45, root_cause=root, implicated=Implicated(nodes=("node2",))
    )


@pytest.mark.parametrize("offline", [True, False])
@pytest.mark.parametrize(
    "category", [Category.APPLICATION, Category.GPU_HARDWARE, Category.NODE_HARDWARE]
)
def test_a_guess_restarts_and_never_stops_or_drains(category: Category, offline: bool) -> None:
    context = (
        PolicyContext.offline("j")
        if offline
        else PolicyContext(job_id="j", current_nodes=("node1", "node2"), healthy_spares=("node3",))
    )
    advice = decide(guess(category, strong_kernel=True), context)
    assert STOP_CONFIDENCE == 0.5
    assert advice.action is Action.RESTART, advice.basis
    assert advice.drain_nodes == () and advice.exclude_nodes == ()


def test_the_same_application_verdict_when_sure_stops_offline() -> None:
    sure = Verdict(True, Kind.CRASH, Category.APPLICATION, 0.8, basis="catalogue")
    assert decide(sure, PolicyContext.offline("j")).action is Action.STOP


def test_reliability_bins() -> None:
    bins = reliability([(0.2, False), (0.25, True), (0.45, False), (0.8, True), (1.0, True)])
    assert [b.low for b in bins] == list(EDGES[:-1])
    assert [b.count for b in bins] == [2, 1, 0, 1, 1]
    assert bins[0].accuracy == 0.5 and bins[-1].right == 1
    assert bins[2].to_json()["count"] == 0


def corpus(root: Path, name: str, rows: list[tuple[str, str, str]]) -> Path:
    folder = root / name
    folder.mkdir()
    labels = []
    for file, text, category in rows:
        (folder / file).write_text(text)
        labels.append(
            {"file": file, "category": category, "failure_kind": "crash", "confidence": "high"}
        )
    (folder / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return folder


def test_eval_none_label_several_corpora_and_the_tables(tmp_path: Path) -> None:
    a = corpus(
        tmp_path,
        "a",
        [
            ("ok.log", "step 1 loss 2.0\nstep 2 loss 1.9\n", "none"),
            ("stale.log", "OSError: [Errno 116] Stale file handle\n", "storage"),
        ],
    )
    b = corpus(tmp_path, "b", [("boom.log", "FATAL: the GPU is lost, reset it\n", "gpu_hardware")])
    data = summary(evaluate_corpora([a, b]))
    assert [o.label.file for o in data.outcomes] == ["a/ok.log", "a/stale.log", "b/boom.log"]
    assert data.per_category["none"] == (1, 1)
    assert data.high_medium == (3, 3)
    assert data.confusion["none"]["none"] == 1
    assert sum(b.count for b in data.calibration) == 2  # the two failures, not the healthy one
    text = format_summary(data)
    for part in ("per-category recall", "confusion", "reliability", "safety: healthy logs"):
        assert part in text


def test_a_label_outside_the_categories_is_refused(tmp_path: Path) -> None:
    folder = corpus(tmp_path, "c", [("x.log", "", "cosmic_rays")])
    with pytest.raises(Exception, match="not one of"):
        read_labels(folder)
