"""How figures are written for people (the CLI report and the web view): durations and
ratios, with "not measured" for None so a missing input never reads as zero."""

from __future__ import annotations

NOT_MEASURED = "not measured"


def duration(seconds: float | None) -> str:
    """``12.3 s``, ``4 min 05 s``, ``2 h 03 min``, ``3 d 04 h``; "not measured" for None."""
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
