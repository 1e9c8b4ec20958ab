"""Measure attribution on a labelled corpus (``labels.jsonl`` in the format of corpus/dev).

Each label names a file, its ``category`` (one of the eight categories, or ``none`` for a
healthy log), its ``failure_kind`` (``crash``, ``hang``, ``straggler``, ``oom``, ``nan``,
``none``) and how sure the thread was (``high``, ``medium``, ``low``). Category is compared
exactly, a verdict of no failure predicting ``none``; kind loosely (``oom`` and ``nan`` are
crashes unless the verdict says hang), since a log of an OOM or a NaN shows a crash.

Besides accuracy, the summary holds what a user needs to trust the numbers: recall per
category, the confusion matrix, a reliability table (``calibration.py``: verdict confidence
against how often it was right) and the safety counts (application logs advised to drain,
healthy logs called failures, stops advised on a guess).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.errors import InputError
from trainmedic.core.model import Action, Advice, Category, Verdict
from trainmedic.offline.analyze import AnalysisResult, analyze_path
from trainmedic.offline.calibration import CalibrationBin, reliability

_LOOSE_KIND = {"oom": ("crash",), "nan": ("crash", "hang"), "straggler": ("straggler", "none")}

NONE_LABEL = "none"
"""The label (and prediction) of a healthy log: no failure in it."""

LABELS = (*(str(c) for c in Category), NONE_LABEL)


@dataclass(frozen=True, slots=True)
class Label:
    file: str
    category: str
    failure_kind: str
    confidence: str


@dataclass(frozen=True, slots=True)
class Outcome:
    label: Label
    category: str  # predicted; "none" when the verdict found no failure
    kind: str  # predicted
    error: str = ""
    confidence: float = 0.0  # the verdict's
    action: str = "none"  # the advice's
    drained: bool = False  # the advice drains a node

    @classmethod
    def of(cls, label: Label, verdict: Verdict, advice: Advice) -> Outcome:
        """What a verdict and its advice say of a labelled log."""
        return cls(
            label,
            str(verdict.category) if verdict.failure else NONE_LABEL,
            str(verdict.kind),
            confidence=verdict.confidence,
            action=str(advice.action),
            drained=bool(advice.drain_nodes),
        )

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
            label = Label(
                file=str(obj["file"]),
                category=str(obj["category"]),
                failure_kind=str(obj.get("failure_kind", "")),
                confidence=str(obj.get("confidence", "low")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}:{number}: bad label: {exc}") from exc
        if label.category not in LABELS:
            raise InputError(
                f"{path}:{number}: bad label: category {label.category!r} is not one of "
                f"{', '.join(LABELS)}"
            )
        labels.append(label)
    return labels


def evaluate(
    corpus: Path,
    labels: Sequence[Label],
    analyze: Callable[[Path], AnalysisResult] = analyze_path,
    prefix: str = "",
) -> list[Outcome]:
    """One outcome per label; ``prefix`` is put before each file name (several corpora)."""
    outcomes = []
    for label in labels:
        shown = Label(prefix + label.file, label.category, label.failure_kind, label.confidence)
        try:
            result = analyze(corpus / label.file)
        except InputError as exc:
            outcomes.append(Outcome(shown, "unreadable", "none", str(exc)))
            continue
        outcomes.append(Outcome.of(shown, result.verdict, result.advice))
    return outcomes


def evaluate_corpora(corpora: Sequence[Path]) -> list[Outcome]:
    """All corpora as one set; file names carry their corpus's name when there are several."""
    outcomes: list[Outcome] = []
    for corpus in corpora:
        prefix = f"{corpus.name}/" if len(corpora) > 1 else ""
        outcomes.extend(evaluate(corpus, read_labels(corpus), prefix=prefix))
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
    per_category: dict[str, Rate]  # recall: right / labelled so
    confusion: dict[str, dict[str, int]]  # label -> predicted -> count
    calibration: tuple[CalibrationBin, ...] = ()
    safety: dict[str, int] | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "category_accuracy_high_medium": list(self.high_medium),
            "category_accuracy_all": list(self.overall),
            "kind_accuracy_all": list(self.kind),
            "per_category": {k: list(v) for k, v in self.per_category.items()},
            "confusion": self.confusion,
            "calibration": [b.to_json() for b in self.calibration],
            "safety": self.safety or {},
            "files": [
                {
                    "file": o.label.file,
                    "label": o.label.category,
                    "predicted": o.category,
                    "label_kind": o.label.failure_kind,
                    "predicted_kind": o.kind,
                    "confidence": o.label.confidence,
                    "verdict_confidence": round(o.confidence, 3),
                    "action": o.action,
                    "ok": o.category_ok,
                    "error": o.error,
                }
                for o in self.outcomes
            ],
        }


def _safety(outcomes: Sequence[Outcome]) -> dict[str, int]:
    """The promises the policy makes, counted: none of these may be above zero."""
    return {
        "application_logs_drained": sum(
            1 for o in outcomes if o.label.category == "application" and o.drained
        ),
        "healthy_logs_called_failures": sum(
            1 for o in outcomes if o.label.category == NONE_LABEL and o.category != NONE_LABEL
        ),
        "stop_or_drain_below_confidence_0_5": sum(
            1
            for o in outcomes
            if o.confidence < 0.5
            and o.category != NONE_LABEL
            and (o.drained or o.action == Action.STOP)
        ),
    }


def summary(outcomes: Sequence[Outcome]) -> Summary:
    sure = [o for o in outcomes if o.label.confidence in ("high", "medium")]
    per_category = {}
    for category in LABELS:
        items = [o for o in outcomes if o.label.category == category]
        if items:
            per_category[category] = _rate(items, lambda o: o.category_ok)
    cols = [*LABELS, "unreadable"]
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
        calibration=reliability(
            [(o.confidence, o.category_ok) for o in outcomes if o.category != NONE_LABEL]
        ),
        safety=_safety(outcomes),
    )


_SAFETY_TEXT = {
    "application_logs_drained": "application logs advised to drain",
    "healthy_logs_called_failures": "healthy logs called failures",
    "stop_or_drain_below_confidence_0_5": "stop or drain advised below confidence 0.5",
}


def format_rate(rate: Rate) -> str:
    hit, total = rate
    return f"{hit}/{total} = {100.0 * hit / total:.1f}%" if total else "n/a"


def format_reliability(bins: Sequence[CalibrationBin]) -> list[str]:
    """The reliability table's lines: one per confidence bin."""
    out = ["  confidence   verdicts  right  accuracy  mean confidence"]
    for b in bins:
        out.append(
            f"  [{b.low:.2f}, {b.high:.2f})  {b.count:>6}  {b.right:>5}  "
            + (f"{b.accuracy:>7.1%}  {b.mean_confidence:>15.2f}" if b.count else "      -")
        )
    return out


def format_summary(data: Summary) -> str:
    out = [
        "  file               label             predicted         conf  "
        "kind label->predicted   label conf"
    ]
    for o in data.outcomes:
        mark = " " if o.category_ok else "x"
        kinds = f"{o.label.failure_kind}->{o.kind}"
        out.append(
            f"{mark} {o.label.file:<18} {o.label.category:<17} {o.category:<17} "
            f"{o.confidence:4.2f}  {kinds:<22} {o.label.confidence}"
        )
    out.append("")
    out.append("per-category recall (by label):")
    for cat, rate in data.per_category.items():
        out.append(f"  {cat:<17} {format_rate(rate)}")
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
    out.append("reliability (verdicts that found a failure, by their confidence):")
    out.extend(format_reliability(data.calibration))
    out.append("")
    for name, count in (data.safety or {}).items():
        out.append(f"safety: {_SAFETY_TEXT.get(name, name)}: {count}")
    out.append(f"category accuracy, high+medium labels: {format_rate(data.high_medium)}")
    out.append(f"category accuracy, all labels:         {format_rate(data.overall)}")
    out.append(f"kind accuracy (loose), all labels:     {format_rate(data.kind)}")
    return "\n".join(out)
