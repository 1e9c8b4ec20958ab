"""Small robust statistics for the detectors: no numpy, so the core stays light.

The windows are short (tens to a few hundred values), so sorting on demand is cheaper than
keeping an order-statistics structure up to date on every one of ~400 observations a second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAD_TO_SIGMA = 1.4826
"""Scales a median absolute deviation to a normal distribution's standard deviation."""


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; NaN for an empty sequence."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    frac = pos - low
    return ordered[low] * (1.0 - frac) + ordered[high] * frac


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median; NaN for an empty sequence."""
    if not values:
        return math.nan
    centre = median(values)
    return median([abs(v - centre) for v in values])
