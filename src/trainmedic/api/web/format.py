"""How the pages write figures: the accounting's durations and ratios ("not measured" for
None), UTC times, and part or cause names as people read them."""

from __future__ import annotations

import time

from trainmedic.core.accounting.format import NOT_MEASURED, duration, percent

__all__ = ["NOT_MEASURED", "clock", "duration", "label", "percent"]


def clock(t: float | None) -> str:
    """UTC, to the second: the pages show one time zone whoever reads them."""
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + "Z"


def label(value: str | None) -> str:
    """``decision_action`` -> ``decision / action``: a part or cause as people read it."""
    if not value:
        return "-"
    return value.replace("decision_action", "decision / action").replace("_", " ")
