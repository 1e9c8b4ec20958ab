"""An expert's reading of the same unseen logs: what the excerpt alone lets anyone conclude.

The first-sight figure compares trainmedic with the threads' conclusions, and a thread often
knew what its excerpt does not show (a version downgrade that fixed it, a cable swapped). To
tell "the tool could have known" from "nobody could from this paste", an on-call reader who
saw only the excerpt (not the thread, not the tool, not the label; the batches' category
conventions only) wrote a category and a confidence per high+medium log
(``expert_baseline.jsonl`` at the root of the batches, one row per log: ``file`` as
``batchNN/rNNNN.log``, ``category``, ``failure_kind``, ``confidence``, ``reason``, ``reader``).
This module joins those rows with the batches' recorded first-sight rows and says, on exactly
the same logs, how often each was right, where only one was, and how the reader's confidence
tracked its accuracy.

    trainmedic eval --first-sight tests/data/realworld   (prints this part when the file is there)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.errors import InputError
from trainmedic.offline.calibration import reliability
from trainmedic.offline.evaluate import format_rate, format_reliability
from trainmedic.offline.first_sight import BatchFirstSight

FILE = "expert_baseline.jsonl"
_KEYS = frozenset({"file", "category", "failure_kind", "confidence", "reason", "reader"})


@dataclass(frozen=True, slots=True)
class ExpertAnswer:
    file: str  # batchNN/rNNNN.log
    category: str
    confidence: float


@dataclass(frozen=True, slots=True)
class Compared:
    """One log both read: its label, the tool's first-sight answer and the expert's."""

    file: str
    label: str
    tool: str
    expert: str
    expert_confidence: float


def load_answers(path: Path) -> tuple[ExpertAnswer, ...]:
    """The reader's rows; a malformed one is refused with its line number."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise InputError(f"{path}: {e}") from e
    answers = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise InputError(f"{path}:{number}: not JSON: {e}") from e
        if not isinstance(row, dict) or set(row) != _KEYS:
            raise InputError(f"{path}:{number}: expected exactly the keys {sorted(_KEYS)}")
        confidence = row["confidence"]
        if isinstance(confidence, bool) or not isinstance(confidence, int | float):
            raise InputError(f"{path}:{number}: confidence must be a number")
        answers.append(ExpertAnswer(str(row["file"]), str(row["category"]), float(confidence)))
    return tuple(answers)


def compare(
    answers: Sequence[ExpertAnswer], batches: Sequence[BatchFirstSight]
) -> tuple[Compared, ...]:
    """The logs both read; an answer for a log no first-sight table scored is refused (it would
    compare the expert with nothing)."""
    recorded = {f"{b.batch}/{r.file}": r for b in batches for r in b.rows}
    out = []
    for a in answers:
        row = recorded.get(a.file)
        if row is None:
            raise InputError(f"{FILE}: {a.file}: no first-sight row for this log")
        out.append(Compared(a.file, row.label, row.predicted, a.category, a.confidence))
    return tuple(out)


def format_comparison(rows: Sequence[Compared]) -> str:
    n = len(rows)
    tool = sum(r.tool == r.label for r in rows)
    expert = sum(r.expert == r.label for r in rows)
    both = sum(r.tool == r.label and r.expert == r.label for r in rows)
    healthy = [r for r in rows if r.label == "none"]
    failed = [r for r in rows if r.label != "none"]
    batches = sorted({r.file.split("/", 1)[0] for r in rows})
    out = [
        f"an expert reading the excerpt alone, on the same logs ({n} high+medium logs of "
        f"{batches[0]}..{batches[-1]}):"
        if batches
        else "an expert reading the excerpt alone:",
        f"  expert          {format_rate((expert, n))}",
        f"  first sight     {format_rate((tool, n))}",
        f"  both right {both}, expert only {expert - both}, first sight only {tool - both}, "
        f"neither {n - expert - tool + both}",
        f"  on the {len(failed)} failure logs: expert "
        f"{format_rate((sum(r.expert == r.label for r in failed), len(failed)))}, first sight "
        f"{format_rate((sum(r.tool == r.label for r in failed), len(failed)))}",
        f"  healthy logs called failures: expert {sum(r.expert != 'none' for r in healthy)}"
        f"/{len(healthy)}, first sight {sum(r.tool != 'none' for r in healthy)}/{len(healthy)}",
        "  by batch (expert, first sight):",
    ]
    for batch in batches:
        mine = [r for r in rows if r.file.startswith(batch + "/")]
        hits = sum(r.expert == r.label for r in mine), sum(r.tool == r.label for r in mine)
        out.append(
            f"    {batch:<10} {format_rate((hits[0], len(mine))):<20} "
            f"{format_rate((hits[1], len(mine)))}"
        )
    out.append("  the expert's reliability (all answers, by its confidence):")
    bins = reliability([(r.expert_confidence, r.expert == r.label) for r in rows])
    out.extend("  " + line for line in format_reliability(bins))
    return "\n".join(out)


def expert_section(root: Path, batches: Sequence[BatchFirstSight]) -> str | None:
    """The comparison for ``root``'s batches, or ``None`` when no reader's file is there."""
    path = root / FILE
    if not path.exists():
        return None
    return format_comparison(compare(load_answers(path), batches))
