"""Plain progress lines: the example trainer's step line, read by one regex.

A healthy job's log is almost all lines like

    2026-11-29T08:50:01.123Z [rank1] node=node2 iter=120 loss=0.53210 step_s=0.01230 \\
        compute_s=0.00810 wait_s=0.00420 samples_per_s=2601.3

(``demo.trainer.rank_log``). The general parsers (``prefix``, ``progress``) read such a line
in about 20 us; ``parse_plain`` reads it with one compiled regex and a few conversions, and
says None for anything else (another format, a NaN loss, an error, a line that is not
exactly this shape), which the general path then reads. For every line it accepts it gives
the same values the general parsers give (``tests/unit/test_plain_progress.py`` holds them
to it on generated lines); the live job-log source also checks that, once per kind of line,
before it trusts this reading (``sources.joblog``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from trainmedic.core.logparse.prefix import iso_seconds

PLAIN = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{1,9})Z"
    r" \[rank(\d{1,6})\] node=([A-Za-z][A-Za-z0-9_.-]{0,62})"
    r" iter=(\d{1,15}) loss=(\d{1,12}\.\d{1,12}) step_s=(\d{1,12}\.\d{1,12})"
    r"(?: compute_s=(\d{1,12}\.\d{1,12}) wait_s=(\d{1,12}\.\d{1,12}))?"
    r"(?: samples_per_s=(\d{1,12}\.\d{1,12}))?"
)
"""The whole line (``fullmatch``): bounded numbers, so every value is finite and small."""


class PlainStep(NamedTuple):
    stamp: float  # the printed time (UTC)
    rank: int
    node: str
    iteration: int
    loss: float
    step_time: float
    compute_time: float | None
    wait_time: float | None
    samples_per_s: float | None

    @property
    def kind(self) -> tuple[int, str, bool, bool]:
        """Lines of one kind have one shape (the same text but for digits)."""
        return (self.rank, self.node, self.compute_time is None, self.samples_per_s is None)


def parse_plain(text: str) -> PlainStep | None:
    m = PLAIN.fullmatch(text)
    if m is None:
        return None
    g = m.groups()
    stamp = iso_seconds(g[0], g[1], g[2], g[3], g[4], g[5])
    if stamp is None:
        return None  # not a date (month 13): the general path decides what it is
    compute, wait, rate = g[12], g[13], g[14]
    return PlainStep(
        stamp + float("0." + g[6]),
        int(g[7]),
        g[8],
        int(g[9]),
        float(g[10]),
        float(g[11]),
        None if compute is None else float(compute),
        None if wait is None else float(wait),
        None if rate is None else float(rate),
    )
