"""Pool the recorded first-sight scores of every labelled batch: what predicts a user's logs.

Each batch of real logs is scored once, before any rule is changed for it, and the table that
``trainmedic eval`` printed then is kept beside the batch (``FIRST_SIGHT_<commit>.txt``). Those
tables, not a re-run of today's code (which has since learnt from every batch), say how the
attribution does on logs it has never seen. ``first_sight.toml`` at the root of the batches
names, per batch, the table that was its honest first sight (a batch scored more than once
keeps the earliest score on main). This module reads those tables back and pools them:
accuracy per batch and overall, per-category recall and the reliability table on unseen logs.

    trainmedic eval --first-sight tests/data/realworld
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.errors import InputError
from trainmedic.offline.calibration import CalibrationBin, reliability
from trainmedic.offline.evaluate import format_rate, format_reliability

INDEX = "first_sight.toml"

_ROW = re.compile(
    r"^[x ] (?P<file>\S+)\s+(?P<label>[a-z_]+)\s+(?P<predicted>[a-z_]+)\s+"
    r"(?:(?P<conf>\d+\.\d+)\s+)?\S+\s+(?P<label_conf>high|medium|low)\s*$"
)
"""One outcome row of ``format_summary``'s table. The confidence column came later: the two
earliest tables have none. The row's own mark is not read back: the earliest tables could not
score a healthy log right, so rightness is label == predicted, today's rule."""


@dataclass(frozen=True, slots=True)
class Scored:
    """One log as its batch's first-sight table recorded it."""

    file: str
    label: str
    predicted: str
    confidence: float | None
    label_confidence: str

    @property
    def right(self) -> bool:
        return self.label == self.predicted


@dataclass(frozen=True, slots=True)
class BatchFirstSight:
    batch: str
    table: str
    rows: tuple[Scored, ...]

    @property
    def high_medium(self) -> tuple[int, int]:
        rows = [r for r in self.rows if r.label_confidence in ("high", "medium")]
        return sum(r.right for r in rows), len(rows)


def parse_table(text: str) -> tuple[Scored, ...]:
    """The outcome rows of a recorded ``trainmedic eval`` table; other lines are ignored."""
    rows = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if m is None:
            continue
        scored = Scored(
            file=m["file"],
            label=m["label"],
            predicted=m["predicted"],
            confidence=float(m["conf"]) if m["conf"] else None,
            label_confidence=m["label_conf"],
        )
        rows.append(scored)
    return tuple(rows)


def load(root: Path) -> tuple[BatchFirstSight, ...]:
    """Every batch ``root/first_sight.toml`` names, with its recorded first-sight rows."""
    index = root / INDEX
    try:
        names = tomllib.loads(index.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{index}: {e}") from e
    batches = []
    for batch, table in sorted(names.items()):
        if not isinstance(table, str):
            raise InputError(f"{index}: {batch}: expected the table's file name, got {table!r}")
        path = root / batch / table
        try:
            rows = parse_table(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise InputError(f"{path}: {e}") from e
        if not rows:
            raise InputError(f"{path}: no outcome rows")
        batches.append(BatchFirstSight(batch, table, rows))
    return tuple(batches)


def pooled_reliability(batches: Sequence[BatchFirstSight]) -> tuple[CalibrationBin, ...]:
    """Reliability of the verdicts that found a failure, over every batch's first sight."""
    return reliability(
        [
            (r.confidence, r.right)
            for b in batches
            for r in b.rows
            if r.predicted != "none" and r.confidence is not None
        ]
    )


def format_first_sight(batches: Sequence[BatchFirstSight]) -> str:
    out = ["first sight (each batch scored once, before any rule was changed for it):"]
    for b in batches:
        out.append(f"  {b.batch:<10} {format_rate(b.high_medium):<20} high+medium   ({b.table})")
    hit = sum(b.high_medium[0] for b in batches)
    total = sum(b.high_medium[1] for b in batches)
    out.append(f"  {'pooled':<10} {format_rate((hit, total)):<20} high+medium")
    rows = [r for b in batches for r in b.rows]
    out.append(
        f"  {'pooled':<10} {format_rate((sum(r.right for r in rows), len(rows))):<20} all labels"
    )
    out.append("")
    out.append("recall by label, high+medium:")
    labels = sorted({r.label for r in rows})
    for label in labels:
        mine = [r for r in rows if r.label == label and r.label_confidence != "low"]
        out.append(f"  {label:<17} {format_rate((sum(r.right for r in mine), len(mine)))}")
    out.append("")
    out.append("reliability on unseen logs (verdicts that found a failure, by their confidence):")
    out.extend(format_reliability(pooled_reliability(batches)))
    return "\n".join(out)
