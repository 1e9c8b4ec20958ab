"""Replay the learned layer's second opinion on every batch's first sight, honestly.

``learned.SECOND_OPINION`` lets the classifier overrule a failure the rule layers named only
as a guess. Whether that helps on logs nobody has seen cannot be read from today's code on old
batches: today's rules have learnt from each of them. So the replay uses what each batch met
when it was new:

* the rule layers' verdict is the batch's recorded first-sight row (``first_sight.py``);
* the classifier is trained only on the batches before it (``first_sight.toml``'s order, which
  is the order they were collected in), never on the batch itself or a later one;
* the policy is ``learned.apply_learned``'s, with its own constants.

Batches with fewer than ``MIN_PRIOR`` batches before them are not replayed (a classifier of a
handful of sets says little), nor rows without a recorded confidence (the earliest tables).

    trainmedic eval --replay-second-opinion tests/data/realworld
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.attribute.learned import LearnedModel, apply_learned
from trainmedic.core.model import Category, Kind, Verdict
from trainmedic.offline.evaluate import format_rate
from trainmedic.offline.first_sight import BatchFirstSight, Scored, load
from trainmedic.offline.train_evidence import LabelledLog, build, load_corpus

MIN_PRIOR = 10


@dataclass(frozen=True, slots=True)
class Replayed:
    batch: str
    row: Scored
    second: str  # the category after the second opinion (the row's own where it stood)


def second_opinion(row: Scored, lines: Sequence[str], model: LearnedModel) -> str:
    """What ``apply_learned`` makes of the recorded first-sight verdict ``row``."""
    if row.predicted == "none" or row.confidence is None:
        return row.predicted
    recorded = Verdict(
        failure=True,
        kind=Kind.CRASH,
        category=Category(row.predicted),
        confidence=row.confidence,
        basis="recorded first sight",
    )
    return str(apply_learned(recorded, lines, model, second_opinion=True).category)


def replay(root: Path, min_prior: int = MIN_PRIOR) -> list[Replayed]:
    """Every replayable high+medium row of ``root``'s batches, with its second opinion."""
    batches = load(root)
    logs = {b.batch: load_corpus(root / b.batch) for b in batches}
    out: list[Replayed] = []
    for i, batch in enumerate(batches):
        if i < min_prior:
            continue
        prior: list[LabelledLog] = [log for b in batches[:i] for log in logs[b.batch]]
        model = build(prior)
        mine = {log.label.file: log for log in logs[batch.batch]}
        for row in _high_medium(batch):
            log = mine.get(row.file)
            if log is not None and row.confidence is not None:
                out.append(Replayed(batch.batch, row, second_opinion(row, log.lines, model)))
    return out


def _high_medium(batch: BatchFirstSight) -> list[Scored]:
    return [r for r in batch.rows if r.label_confidence in ("high", "medium")]


def format_replay(rows: Sequence[Replayed]) -> str:
    out = [
        "the learned second opinion, replayed on each batch's first sight (classifier trained "
        "on the batches before it only):"
    ]
    for batch in sorted({r.batch for r in rows}):
        mine = [r for r in rows if r.batch == batch]
        before = sum(r.row.right for r in mine)
        after = sum(r.second == r.row.label for r in mine)
        out.append(f"  {batch:<10} {before:>3} -> {after:>3} of {len(mine)}")
    before = sum(r.row.right for r in rows)
    after = sum(r.second == r.row.label for r in rows)
    out.append(
        f"  {'pooled':<10} {format_rate((before, len(rows)))} -> {format_rate((after, len(rows)))}"
    )
    changed = [r for r in rows if r.second != r.row.predicted]
    out.append(
        f"  overruled {len(changed)}: the guess was right {sum(r.row.right for r in changed)}, "
        f"the second opinion right {sum(r.second == r.row.label for r in changed)}"
    )
    return "\n".join(out)
