"""Lines a terminal cut at its width: a pasted log's long lines continue on the next line.

Told apart from lines of their own by their shape alone (pure): the scan joins such a
continuation to the line it continues before matching.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.prefix import parse_prefix

WRAP_MIN = 80
"""Shorter lines are never taken for terminal-wrapped ones."""

_NUMBERED_RECORD = re.compile(r"\d{1,7}\s+\d{4}-\d\d-\d\d[ T]\d\d:\d\d")
"""A record's index and its date (ras-mc-ctl's "2 2024-12-20 09:33:01 +0000 error: ..."): a
tool that numbers its records prints each on a line of its own, all of one width when their
fields are fixed-width, which is not a terminal's cut."""


def is_wrap(prev: str, text: str, widths: dict[int, int]) -> bool:
    """Whether ``text`` continues ``prev``, a line cut by a terminal at its width.

    A pasted terminal cuts every long line at one width, mid-word: ``prev`` has a width seen
    at least twice, ends inside a word, ``text`` starts inside one and carries no prefix.
    """
    width = len(prev)
    if width < WRAP_MIN or widths.get(width, 0) < 2 or not text:
        return False
    if not (prev[-1].isalnum() and text[0].isalnum()):
        return False
    if text[4:5] == "-" and text[:4].isdigit():
        return False  # an ISO date ("2026-11-29T..."): a line of its own, never a cut
    if _NUMBERED_RECORD.match(text):
        return False
    return parse_prefix(text).body_start == 0
