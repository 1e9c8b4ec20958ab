"""Train the learned evidence layer on the labelled real logs and write its model file.

``python -m trainmedic.offline.train_evidence [DIR ...]`` reads each DIR's ``labels.jsonl`` and
logs (by default every ``tests/data/realworld`` batch: the sets in the repository, so a clean
clone retrains the same file; the shared development sets stay outside it, scored only),
trains ``core/attribute/learned_model.py``'s classifier on all of them, chooses the threshold
below which a log's "healthy" probability calls it a failure by leave-one-set-out
cross-validation inside the training sets, and writes ``core/attribute/learned_model.json``.
``--check`` rewrites nothing and exits non-zero when the file differs from a fresh training.

The file records, per set, a digest of the (file, label, features) it was trained on: a test
ties the committed model to the committed logs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.attribute.learned import LearnedModel
from trainmedic.core.attribute.learned_model import HEALTHY, Example, train
from trainmedic.core.attribute.learned_text import features, sample_text
from trainmedic.core.errors import InputError
from trainmedic.offline.evaluate import Label, read_labels

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent.parent / "shared" / "corpus"
"""The shared development sets sit beside the work trees (``/work/shared/corpus``)."""
SHARED_CANDIDATES = (Path("/work/shared/corpus"), REPO.parent / "shared" / "corpus", SHARED)
REALWORLD = REPO / "tests" / "data" / "realworld"
MODEL_PATH = REPO / "src" / "trainmedic" / "core" / "attribute" / "learned_model.json"

FAILURE_MARGIN = 0.02
"""Added to the highest failure score of a healthy log (out of fold): the threshold."""


@dataclass(frozen=True, slots=True)
class LabelledLog:
    corpus: Path
    label: Label
    lines: tuple[str, ...]
    example: Example


def training_corpora() -> list[Path]:
    """The labelled sets the packaged model is trained on: the repository's own batches."""
    return sorted(p for p in REALWORLD.iterdir() if (p / "labels.jsonl").is_file())


def default_corpora() -> list[Path]:
    """Every labelled set at hand (the shared development sets too, where present): what
    cross-validation scores."""
    shared = next((p for p in SHARED_CANDIDATES if (p / "dev" / "labels.jsonl").is_file()), None)
    found = [shared / name for name in ("dev", "dev2")] if shared else []
    found += sorted(p for p in REALWORLD.iterdir() if (p / "labels.jsonl").is_file())
    return found


def load_corpus(corpus: Path) -> list[LabelledLog]:
    logs = []
    for label in read_labels(corpus):
        path = corpus / label.file
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        lines = sample_text(text)
        example = Example(features(lines), label.category, corpus.name)
        logs.append(LabelledLog(corpus, label, lines, example))
    return logs


def choose_threshold(examples: Sequence[Example]) -> float:
    """Leave-one-set-out inside ``examples``: the highest failure score a healthy log of a
    held-out set got from a model trained on the other sets, plus ``FAILURE_MARGIN``, so that
    no healthy log of any held-out set would have been called a failure."""
    groups = sorted({e.group for e in examples})
    worst = -math.inf
    for held in groups:
        rest = [e for e in examples if e.group != held]
        if not rest:
            continue
        model = train(rest)
        for e in examples:
            if e.group == held and e.label == HEALTHY:
                worst = max(worst, model.failure_score(e.features))
    return round(worst + FAILURE_MARGIN, 3) if worst != -math.inf else math.inf


def digest(logs: Sequence[LabelledLog]) -> str:
    h = hashlib.sha256()
    for log in sorted(logs, key=lambda x: x.label.file):
        h.update(
            json.dumps([log.label.file, log.label.category, sorted(log.example.features)]).encode()
        )
    return h.hexdigest()[:16]


def build(logs: Sequence[LabelledLog]) -> LearnedModel:
    examples = [log.example for log in logs]
    sets = sorted({log.corpus.name for log in logs})
    trained_on = {s: digest([log for log in logs if log.corpus.name == s]) for s in sets}
    return LearnedModel(train(examples), choose_threshold(examples), trained_on)


def model_text(model: LearnedModel) -> str:
    return json.dumps(model.to_json(), indent=0, sort_keys=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainmedic.offline.train_evidence")
    parser.add_argument("corpus", metavar="DIR", nargs="*", help="labelled sets (default: all)")
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args(argv)
    corpora = [Path(c) for c in args.corpus] or training_corpora()
    logs = [log for corpus in corpora for log in load_corpus(corpus)]
    text = model_text(build(logs))
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'STALE: retrain'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(logs)} logs from {len(corpora)} sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
