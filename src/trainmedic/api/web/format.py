"""How the pages write figures: durations, ratios and times, and "not measured" for None."""

from __future__ import annotations

import time

NOT_MEASURED = "not measured"


def duration(seconds: float | None) -> str:
    """``12.3 s``, ``4 min 05 s``, ``2 h 03 min``; "not measured" for None."""
    if seconds is None:
        return NOT_MEASURED
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24:02d} h"


def percent(ratio: float | None) -> str:
    return NOT_MEASURED if ratio is None else f"{100 * ratio:.1f} %"


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
