"""A small, deterministic text classifier for the learned evidence layer (pure, stdlib only).

Multinomial naive Bayes over binary features (``learned_text.features``: a word or word pair
counts once per log), Laplace smoothing. Chosen over a logistic regression because training is
one counting pass (leave-one-batch-out cross-validation retrains it dozens of times in pure
Python) and the model is plain integer counts, so the file it is stored in is reproduced byte
for byte by retraining.

Feature selection keeps the vocabulary small and general: a feature must occur in at least
``MIN_DOCS`` logs drawn from at least ``MIN_SETS`` different labelled sets (a word that only
one batch printed is that batch's, not the failure's), and of those the ``MAX_FEATURES`` with
the highest mutual information with the label are kept.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HEALTHY = "none"
"""The label of a healthy log; every other class is a failure."""
MIN_DOCS = 3
MIN_SETS = 2
MAX_FEATURES = 1500
ALPHA = 1.0


@dataclass(frozen=True, slots=True)
class Example:
    """One labelled log: its features, its label (a category or ``none``) and its set."""

    features: frozenset[str]
    label: str
    group: str


@dataclass(frozen=True, slots=True)
class TextModel:
    """Per class: how many logs it had and, per kept feature, how many of them held it."""

    classes: tuple[str, ...]
    docs: Mapping[str, int]
    counts: Mapping[str, Mapping[str, int]]  # feature -> class -> logs holding it
    alpha: float = ALPHA

    def posterior(self, feats: frozenset[str]) -> dict[str, float]:
        """P(class | features), the classes summing to one (empty for an empty model)."""
        if not self.classes:
            return {}
        total_docs = sum(self.docs.values())
        vocab = len(self.counts)
        mass = {c: 0 for c in self.classes}
        for per_class in self.counts.values():
            for c, n in per_class.items():
                mass[c] += n
        scores = {
            c: math.log((self.docs[c] + 1) / (total_docs + len(self.classes))) for c in self.classes
        }
        for f in sorted(feats):
            if f not in self.counts:
                continue
            for c in self.classes:
                n = self.counts[f].get(c, 0)
                scores[c] += math.log((n + self.alpha) / (mass[c] + self.alpha * vocab))
        top = max(scores.values())
        exp = {c: math.exp(s - top) for c, s in scores.items()}
        norm = sum(exp.values())
        return {c: exp[c] / norm for c in self.classes}

    def failure_score(self, feats: frozenset[str]) -> float:
        """How much more a failure than a healthy log uses the log's words: the mean, over the
        model's features the log holds, of log P(feature | failure) / P(feature | healthy).
        A mean, not a sum, so a long log is not more of a failure for being long; 0 without
        any known feature."""
        known = sorted(f for f in feats if f in self.counts)
        if not known or HEALTHY not in self.docs:
            return 0.0
        vocab = len(self.counts)
        healthy = sum(pc.get(HEALTHY, 0) for pc in self.counts.values()) + self.alpha * vocab
        failure = sum(n for pc in self.counts.values() for n in pc.values()) + self.alpha * vocab
        failure -= healthy - self.alpha * vocab
        total = 0.0
        for f in known:
            n_healthy = self.counts[f].get(HEALTHY, 0)
            n_failure = sum(self.counts[f].values()) - n_healthy
            total += math.log((n_failure + self.alpha) / failure)
            total -= math.log((n_healthy + self.alpha) / healthy)
        return total / len(known)

    def to_json(self) -> dict[str, object]:
        return {
            "classes": list(self.classes),
            "docs": {c: self.docs[c] for c in self.classes},
            "alpha": self.alpha,
            "counts": {f: dict(sorted(self.counts[f].items())) for f in sorted(self.counts)},
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, object]) -> TextModel:
        classes = obj["classes"]
        docs = obj["docs"]
        counts = obj["counts"]
        alpha = obj.get("alpha", ALPHA)
        if not (
            isinstance(classes, list)
            and isinstance(docs, dict)
            and isinstance(counts, dict)
            and isinstance(alpha, int | float)
        ):
            raise ValueError("learned model: classes, docs, counts and alpha are malformed")
        return cls(
            classes=tuple(str(c) for c in classes),
            docs={str(c): int(n) for c, n in docs.items()},
            counts={str(f): {str(c): int(n) for c, n in pc.items()} for f, pc in counts.items()},
            alpha=float(alpha),
        )


def _mutual_information(n_f: Mapping[str, int], docs: Mapping[str, int], total: int) -> float:
    """I(feature present; class) in nats, from per-class counts of logs holding it."""
    held = sum(n_f.values())
    score = 0.0
    for c, n_c in docs.items():
        for joint, marginal in ((n_f.get(c, 0), held), (n_c - n_f.get(c, 0), total - held)):
            if joint and marginal:
                score += joint / total * math.log(joint * total / (marginal * n_c))
    return score


def train(examples: Sequence[Example], max_features: int = MAX_FEATURES) -> TextModel:
    """The model of ``examples``; deterministic (ties broken by the feature's name)."""
    docs = Counter(e.label for e in examples)
    classes = tuple(sorted(docs))
    per_feature: dict[str, Counter[str]] = {}
    sets: dict[str, set[str]] = {}
    for e in examples:
        for f in e.features:
            per_feature.setdefault(f, Counter())[e.label] += 1
            sets.setdefault(f, set()).add(e.group)
    total = len(examples)
    ranked = sorted(
        (
            (-_mutual_information(pc, docs, total), f)
            for f, pc in per_feature.items()
            if sum(pc.values()) >= MIN_DOCS and len(sets[f]) >= MIN_SETS
        ),
    )
    kept = {f: dict(per_feature[f]) for _, f in ranked[:max_features]}
    return TextModel(classes=classes, docs=dict(docs), counts=kept)
