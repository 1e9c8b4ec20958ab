"""Leave-one-set-out cross-validation of the learned evidence layer.

For each labelled set S: train the classifier (and choose its healthy threshold) on every
other set only, then score S with (a) the rule layers alone and (b) the rule layers followed by
the model that never saw S. The rule layers were tuned on every set, so (a) is optimistic;
the gain of (b) over (a) is the honest signal of what the learned layer adds on unseen logs.

``python -m trainmedic.offline.crossval [DIR ...]`` (or ``trainmedic eval --crossval DIR...``)
prints per set and pooled: high+medium accuracy, the safety counts and both
reliability tables.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from trainmedic.core.attribute.learned import apply_learned
from trainmedic.core.errors import InputError
from trainmedic.core.policy.context import PolicyContext
from trainmedic.core.policy.decide import decide
from trainmedic.offline.analyze import analyze_path
from trainmedic.offline.evaluate import Outcome, Summary, summary
from trainmedic.offline.train_evidence import LabelledLog, build, default_corpora, load_corpus


@dataclass(frozen=True, slots=True)
class SetResult:
    name: str
    rules: Summary  # (a)
    learned: Summary  # (b): names unknown failures (adopted)
    calling: Summary  # (c): also calls failures in logs the layers found none in


def _outcomes(logs: Sequence[LabelledLog], held: str, others: Sequence[LabelledLog]) -> SetResult:
    model = build(others)
    rules: list[Outcome] = []
    learned: list[Outcome] = []
    calling: list[Outcome] = []
    for log in logs:
        label = replace(log.label, file=f"{held}/{log.label.file}")
        try:
            result = analyze_path(log.corpus / log.label.file, learned=False)
        except InputError as exc:
            for out in (rules, learned, calling):
                out.append(Outcome(label, "unreadable", "none", str(exc)))
            continue
        for verdict, out in (
            (result.verdict, rules),
            (apply_learned(result.verdict, log.lines, model, call_failures=False), learned),
            (apply_learned(result.verdict, log.lines, model, call_failures=True), calling),
        ):
            advice = decide(verdict, PolicyContext.offline(str(log.corpus / log.label.file)))
            out.append(Outcome.of(label, verdict, advice))
    return SetResult(held, summary(rules), summary(learned), summary(calling))


def crossvalidate(all_logs: Sequence[LabelledLog]) -> list[SetResult]:
    names = sorted({log.corpus.name for log in all_logs}, key=_set_order)
    return [
        _outcomes(
            [log for log in all_logs if log.corpus.name == name],
            name,
            [log for log in all_logs if log.corpus.name != name],
        )
        for name in names
    ]


def _set_order(name: str) -> tuple[int, str]:
    return (0 if name.startswith("dev") else 1, name)


def _rate(rate: tuple[int, int]) -> str:
    hit, total = rate
    return f"{hit:>3}/{total:<3} {100.0 * hit / total:5.1f}%" if total else "      n/a     "


def _safety(data: Summary) -> str:
    s = data.safety or {}
    return (
        f"{s['healthy_logs_called_failures']}/{s['application_logs_drained']}/"
        f"{s['stop_or_drain_below_confidence_0_5']}"
    )


def format_crossval(results: Sequence[SetResult]) -> str:
    out = [
        "leave-one-set-out: (a) rule layers (tuned on every set: optimistic); the learned layer",
        "trained without the set (b) naming unknown failures [adopted], (c) also calling",
        "failures in logs the layers found none in [off]. Accuracy on high+medium labels;",
        "safety = healthy called failures / application advised to drain / stop or drain < 0.5",
        f"  {'set':<8} {'(a)':>14} {'(b)':>14} {'(c)':>14}   safety (a)  (b)    (c)",
    ]
    pooled = _pooled(results)
    for r in [*results, pooled]:
        out.append(
            f"  {r.name:<8} {_rate(r.rules.high_medium)} {_rate(r.learned.high_medium)} "
            f"{_rate(r.calling.high_medium)}   {_safety(r.rules):>6} {_safety(r.learned):>6} "
            f"{_safety(r.calling):>6}"
        )
    out.append(
        f"  all labels, pooled: (a) {_rate(pooled.rules.overall)} (b) "
        f"{_rate(pooled.learned.overall)} (c) {_rate(pooled.calling.overall)}"
    )
    for title, data in (("(a)", pooled.rules), ("(b)", pooled.learned), ("(c)", pooled.calling)):
        out.append(f"reliability {title}, pooled (verdicts that found a failure):")
        for b in data.calibration:
            acc = f"{b.accuracy:6.1%}" if b.count else "     -"
            out.append(
                f"  [{b.low:.2f}, {b.high:.2f})  {b.count:>4} verdicts {b.right:>4} right {acc}"
            )
    for title, data in (("(b)", pooled.learned), ("(c)", pooled.calling)):
        out.extend(_changes(title, pooled.rules, data))
    return "\n".join(out)


def _changes(title: str, rules: Summary, learned: Summary) -> list[str]:
    changed = [
        (a, b)
        for a, b in zip(rules.outcomes, learned.outcomes, strict=True)
        if a.category != b.category
    ]
    fixed = sum(1 for _, b in changed if b.category_ok)
    broke = sum(1 for a, _ in changed if a.category_ok)
    out = [f"{title} changed {len(changed)} verdicts: {fixed} now right, {broke} were right"]
    for a, b in changed:
        mark = "+" if b.category_ok else "-" if a.category_ok else " "
        out.append(
            f"  {mark} {a.label.file:<18} label {a.label.category:<16} {a.category} -> "
            f"{b.category} ({b.confidence:.2f}; label {a.label.confidence})"
        )
    return out


def _pooled(results: Sequence[SetResult]) -> SetResult:
    return SetResult(
        "pooled",
        summary([o for r in results for o in r.rules.outcomes]),
        summary([o for r in results for o in r.learned.outcomes]),
        summary([o for r in results for o in r.calling.outcomes]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainmedic.offline.crossval")
    parser.add_argument("corpus", metavar="DIR", nargs="*", help="labelled sets (default: all)")
    args = parser.parse_args(argv)
    corpora = [Path(c) for c in args.corpus] or default_corpora()
    logs = [log for corpus in corpora for log in load_corpus(corpus)]
    print(format_crossval(crossvalidate(logs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
