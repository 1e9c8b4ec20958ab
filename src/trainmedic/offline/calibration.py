"""Reliability of verdict confidence: does a 0.8 verdict come true about 80 % of the time?

Verdicts are put in fixed confidence bins; each bin reports how many fell in it, how many were
right and their mean confidence. A calibrated attribution has accuracy close to the mean
confidence in every bin; the policy relies on it (below 0.5 a verdict never stops or shrinks
a job), so ``trainmedic eval`` prints the table for every corpus it measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EDGES = (0.0, 0.3, 0.5, 0.7, 0.85, 1.0)
"""Bin edges: guesses (< 0.3), low (< 0.5, the policy's stop threshold), medium, high, sure."""


@dataclass(frozen=True, slots=True)
class CalibrationBin:
    low: float
    high: float  # exclusive, except the last bin, which holds 1.0
    count: int
    right: int
    mean_confidence: float

    @property
    def accuracy(self) -> float:
        return self.right / self.count if self.count else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "low": self.low,
            "high": self.high,
            "count": self.count,
            "right": self.right,
            "accuracy": round(self.accuracy, 3),
            "mean_confidence": round(self.mean_confidence, 3),
        }


def reliability(
    points: Sequence[tuple[float, bool]], edges: Sequence[float] = EDGES
) -> tuple[CalibrationBin, ...]:
    """Bins of ``(confidence, right)`` pairs, one per pair of consecutive ``edges``."""
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(len(edges) - 1)]
    for confidence, right in points:
        index = len(bins) - 1
        for i in range(len(bins)):
            if confidence < edges[i + 1]:
                index = i
                break
        bins[index].append((confidence, right))
    return tuple(
        CalibrationBin(
            low=edges[i],
            high=edges[i + 1],
            count=len(items),
            right=sum(1 for _, ok in items if ok),
            mean_confidence=sum(c for c, _ in items) / len(items) if items else 0.0,
        )
        for i, items in enumerate(bins)
    )
