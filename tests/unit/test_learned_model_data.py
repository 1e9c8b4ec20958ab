"""The packaged learned model is data tied to the labelled logs it was trained on (retraining
reproduces the file byte for byte, every set it names still holds what it was trained on),
its use inside ``analyze``, and the leave-one-set-out cross-validation that measures it."""

from __future__ import annotations

import json
from pathlib import Path

from trainmedic.core.attribute.learned import ADOPTED, packaged_model
from trainmedic.core.attribute.learned_model import MAX_FEATURES
from trainmedic.core.model import Category
from trainmedic.offline.analyze import analyze_path
from trainmedic.offline.crossval import crossvalidate, format_crossval
from trainmedic.offline.train_evidence import (
    MODEL_PATH,
    REALWORLD,
    build,
    digest,
    load_corpus,
    model_text,
    training_corpora,
)


def test_the_packaged_model_is_small_and_loads() -> None:
    model = packaged_model()
    assert len(model.text.counts) <= MAX_FEATURES
    assert MODEL_PATH.stat().st_size < 200_000
    assert "none" in model.text.classes and "storage" in model.text.classes
    # No feature names a number, a host or a path: only words and placeholders.
    assert not any(ch.isdigit() for f in model.text.counts for ch in f)
    assert ADOPTED


def test_the_repo_sets_are_what_the_model_was_trained_on() -> None:
    trained_on = json.loads(MODEL_PATH.read_text(encoding="utf-8"))["trained_on"]
    batches = sorted(p for p in REALWORLD.iterdir() if (p / "labels.jsonl").is_file())
    assert {p.name for p in batches} <= set(trained_on), "retrain: a batch is missing"
    for batch in batches:
        assert digest(load_corpus(batch)) == trained_on[batch.name], (
            f"{batch.name} changed since training: run python -m trainmedic.offline.train_evidence"
        )


def test_retraining_reproduces_the_file() -> None:
    """A fresh training on the repository's batches writes exactly the committed file (no set
    outside the repository is needed: a clean clone checks it too)."""
    corpora = training_corpora()
    assert len(corpora) >= 8
    logs = [log for corpus in corpora for log in load_corpus(corpus)]
    assert model_text(build(logs)) == MODEL_PATH.read_text(encoding="utf-8"), (
        "stale: run python -m trainmedic.offline.train_evidence"
    )


def test_crossval_holds_each_set_out_and_keeps_safety() -> None:
    logs = [log for b in ("batch07", "batch08") for log in load_corpus(REALWORLD / b)]
    results = crossvalidate(logs)
    assert [r.name for r in results] == ["batch07", "batch08"]
    for r in results:
        assert len(r.rules.outcomes) == len(r.learned.outcomes) == len(r.calling.outcomes)
        safety = r.learned.safety or {}
        assert safety["application_logs_drained"] == 0
        assert safety["stop_or_drain_below_confidence_0_5"] == 0
    text = format_crossval(results)
    assert "pooled" in text and "reliability (b)" in text


def test_analyze_names_unnamed_failure_lines_with_the_packaged_model(tmp_path: Path) -> None:
    log = tmp_path / "reads.log"
    log.write_text(
        "2024/05/01 10:00:00 client[4411] ERROR: read of block 918 failed after 3 retries\n" * 3,
        encoding="utf-8",
    )
    rules = analyze_path(log, learned=False).verdict
    assert rules.failure and rules.category is Category.UNKNOWN
    verdict = analyze_path(log).verdict
    assert verdict.category is Category.STORAGE  # failed block reads, in the model's data
    assert verdict.confidence < 0.5 and verdict.implicated.nodes == ()
    assert "learned evidence layer" in verdict.basis
