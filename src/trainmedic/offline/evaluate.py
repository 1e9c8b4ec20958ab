"""Measure attribution on a labelled corpus (``labels.jsonl`` in the format of corpus/dev).

Each label names a file, its ``category``, its ``failure_kind`` (``crash``, ``hang``,
``straggler``, ``oom``, ``nan``) and how sure the thread was (``high``, ``medium``, ``low``).
Category is compared exactly; kind loosely (``oom`` and ``nan`` are crashes unless the verdict
says hang), since a log of an OOM or a NaN shows a crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.errors import InputError
from trainmedic.core.model import Category
from trainmedic.offline.analyze import AnalysisResult, analyze_path

_LOOSE_KIND = {"oom": ("crash",), "nan": ("crash", "hang"), "straggler": ("straggler", "none")}


@dataclass(frozen=True, slots=True)
class Label:
    file: str
    category: str
    failure_kind: str
    confidence: str


@dataclass(frozen=True, slots=True)
class Outcome:
    label: Label
    category: str  # predicted
    kind: str  # predicted
    error: str = ""

    @property
    def category_ok(self) -> bool:
        return self.category == self.label.category

    @property
    def kind_ok(self) -> bool:
        return self.kind in _LOOSE_KIND.get(self.label.failure_kind, (self.label.failure_kind,))


def read_labels(corpus: Path) -> list[Label]:
    path = corpus / "labels.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read labels: {exc}") from exc
    labels = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            labels.append(
                Label(
                    file=str(obj["file"]),
                    category=str(obj["category"]),
                    failure_kind=str(obj.get("failure_kind", "")),
                    confidence=str(obj.get("confidence", "low")),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}:{number}: bad label: {exc}") from exc
    return labels


def evaluate(
    corpus: Path,
    labels: Sequence[Label],
    analyze: Callable[[Path], AnalysisResult] = analyze_path,
) -> list[Outcome]:
    outcomes = []
    for label in labels:
        try:
            result = analyze(corpus / label.file)
        except InputError as exc:
            outcomes.append(Outcome(label, "unreadable", "none", str(exc)))
            continue
        v = result.verdict
        outcomes.append(Outcome(label, str(v.category), str(v.kind)))
    return outcomes


Rate = tuple[int, int]  # (correct, total)


def _rate(items: Sequence[Outcome], key: Callable[[Outcome], bool]) -> Rate:
    return sum(1 for o in items if key(o)), len(items)


@dataclass(frozen=True, slots=True)
class Summary:
    outcomes: tuple[Outcome, ...]
    high_medium: Rate
    overall: Rate
    kind: Rate
    per_category: dict[str, Rate]
    confusion: dict[str, dict[str, int]]  # label -> predicted -> count

    def to_json(self) -> dict[str, object]:
        return {
            "category_accuracy_high_medium": list(self.high_medium),
            "category_accuracy_all": list(self.overall),
            "kind_accuracy_all": list(self.kind),
            "per_category": {k: list(v) for k, v in self.per_category.items()},
            "confusion": self.confusion,
            "files": [
                {
                    "file": o.label.file,
                    "label": o.label.category,
                    "predicted": o.category,
                    "label_kind": o.label.failure_kind,
                    "predicted_kind": o.kind,
                    "confidence": o.label.confidence,
                    "ok": o.category_ok,
                    "error": o.error,
                }
                for o in self.outcomes
            ],
        }


def summary(outcomes: Sequence[Outcome]) -> Summary:
    sure = [o for o in outcomes if o.label.confidence in ("high", "medium")]
    per_category = {}
    for category in Category:
        items = [o for o in outcomes if o.label.category == category]
        if items:
            per_category[str(category)] = _rate(items, lambda o: o.category_ok)
    cols = [str(c) for c in Category] + ["unreadable"]
    confusion = {
        row: {
            col: sum(1 for o in outcomes if o.label.category == row and o.category == col)
            for col in cols
        }
        for row in cols[:-1]
    }
    return Summary(
        outcomes=tuple(outcomes),
        high_medium=_rate(sure, lambda o: o.category_ok),
        overall=_rate(outcomes, lambda o: o.category_ok),
        kind=_rate(outcomes, lambda o: o.kind_ok),
        per_category=per_category,
        confusion=confusion,
    )


def _pct(rate: Rate) -> str:
    hit, total = rate
    return f"{hit}/{total} = {100.0 * hit / total:.1f}%" if total else "n/a"


def format_summary(data: Summary) -> str:
    out = ["  file       label             predicted         kind label->predicted   label conf"]
    for o in data.outcomes:
        mark = " " if o.category_ok else "x"
        kinds = f"{o.label.failure_kind}->{o.kind}"
        out.append(
            f"{mark} {o.label.file:<10} {o.label.category:<17} {o.category:<17} "
            f"{kinds:<22} {o.label.confidence}"
        )
    out.append("")
    out.append("per-category accuracy (by label):")
    for cat, rate in data.per_category.items():
        out.append(f"  {cat:<17} {_pct(rate)}")
    out.append("")
    used = [
        c
        for c in next(iter(data.confusion.values()), {})
        if any(r[c] for r in data.confusion.values())
    ]
    out.append("confusion (rows = label, columns = predicted):")
    out.append(" " * 18 + " ".join(f"{c[:8]:>8}" for c in used))
    for row, counts in data.confusion.items():
        if any(counts.values()):
            out.append(f"  {row:<16}" + " ".join(f"{counts[c]:>8}" for c in used))
    out.append("")
    out.append(f"category accuracy, high+medium labels: {_pct(data.high_medium)}")
    out.append(f"category accuracy, all labels:         {_pct(data.overall)}")
    out.append(f"kind accuracy (loose), all labels:     {_pct(data.kind)}")
    return "\n".join(out)
