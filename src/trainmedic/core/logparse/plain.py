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

import operator
import re
from typing import NamedTuple

from trainmedic.core.logparse.prefix import iso_seconds
from trainmedic.core.logparse.traceback import START as TRACEBACK_START

PLAIN = re.compile(
    r"((\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d))\.(\d{1,9})Z"
    r" \[rank(\d{1,6})\] node=([A-Za-z][A-Za-z0-9_.-]{0,62})"
    r" iter=(\d{1,15}) loss=(\d{1,12}\.\d{1,12}) step_s=(\d{1,12}\.\d{1,12})"
    r"(?: compute_s=(\d{1,12}\.\d{1,12}) wait_s=(\d{1,12}\.\d{1,12}))?"
    r"(?: samples_per_s=(\d{1,12}\.\d{1,12}))?"
)
"""The whole line (``fullmatch``): bounded numbers, so every value is finite and small."""

Kind = tuple[str, str, bool, bool]
"""(rank digits, node, with compute/wait, with samples/s): lines of one kind have one shape
(the same text but for digits)."""

_SECONDS: dict[str, float | None] = {}  # "YYYY-MM-DDTHH:MM:SS" -> its time: a log's lines share it


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
    kind: Kind


def parse_plain(text: str) -> PlainStep | None:
    m = PLAIN.fullmatch(text)
    if m is None:
        return None
    g = m.groups()
    second = _SECONDS.get(g[0], -1.0)
    if second == -1.0:
        if len(_SECONDS) >= 4096:
            _SECONDS.clear()
        second = _SECONDS[g[0]] = iso_seconds(g[1], g[2], g[3], g[4], g[5], g[6])
    if second is None:
        return None  # not a date (month 13): the general path decides what it is
    compute, wait, rate = g[13], g[14], g[15]
    return PlainStep(
        second + float("0." + g[7]),
        int(g[8]),
        g[9],
        int(g[10]),
        float(g[11]),
        float(g[12]),
        None if compute is None else float(compute),
        None if wait is None else float(wait),
        None if rate is None else float(rate),
        (g[8], g[9], compute is None, rate is None),
    )


_NUMBER = r"(\d{1,12}\.\d{1,12})"
_PLAIN_LINES = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{1,9})Z"
    r" \[rank(\d{1,6})\] node=([A-Za-z][A-Za-z0-9_.-]{0,62})"
    rf" iter=(\d{{1,15}}) loss={_NUMBER} step_s={_NUMBER}"
    rf"(?: compute_s={_NUMBER} wait_s={_NUMBER})?(?: samples_per_s={_NUMBER})?$",
    re.MULTILINE,
)
"""``PLAIN`` (the same lines), a line at a time in a block, with fewer groups: findall makes
a string of each."""


class PlainColumns(NamedTuple):
    """Lines of one kind that are all plain (``parse_plain_block``), column by column: each
    value as ``parse_plain`` reads it."""

    kind: Kind
    rank: int
    node: str
    stamps: tuple[float, ...]
    iterations: tuple[int, ...]
    losses: tuple[float, ...]
    step_times: tuple[float, ...]
    compute_times: tuple[float, ...] | None
    wait_times: tuple[float, ...] | None
    samples_per_s: tuple[float, ...] | None


def parse_plain_block(text: str, count: int) -> PlainColumns | None:
    """``count`` lines joined by ``\\n``, when every one is plain and of one kind; else None
    (the caller reads them one by one). One regex pass and the conversions column by column,
    at C speed: no Python code runs per line."""
    found = _PLAIN_LINES.findall(text)
    if len(found) != count or not found:
        return None  # a line that is not plain (a match never spans two lines)
    columns = list(zip(*found, strict=True))
    ranks, nodes, compute, rate = columns[2], columns[3], columns[7], columns[9]
    if len(set(ranks)) > 1 or len(set(nodes)) > 1:
        return None
    if len(set(map(bool, compute))) > 1 or len(set(map(bool, rate))) > 1:
        return None
    for second in set(columns[0]):
        if second not in _SECONDS:
            if len(_SECONDS) >= 4096:
                _SECONDS.clear()
            d = second  # YYYY-MM-DDTHH:MM:SS, as PLAIN's groups split it
            _SECONDS[second] = iso_seconds(d[:4], d[5:7], d[8:10], d[11:13], d[14:16], d[17:])
        if _SECONDS.get(second) is None:
            return None
    seconds = map(_SECONDS.__getitem__, columns[0])
    fractions = map(float, map("0.".__add__, columns[1]))
    return PlainColumns(
        kind=(ranks[0], nodes[0], not compute[0], not rate[0]),
        rank=int(ranks[0]),
        node=nodes[0],
        stamps=tuple(map(operator.add, seconds, fractions)),
        iterations=tuple(map(int, columns[4])),
        losses=tuple(map(float, columns[5])),
        step_times=tuple(map(float, columns[6])),
        compute_times=tuple(map(float, compute)) if compute[0] else None,
        wait_times=tuple(map(float, columns[8])) if compute[0] else None,
        samples_per_s=tuple(map(float, rate)) if rate[0] else None,
    )


# Digit-free words that make a line more than a plain step to the scan or its trackers: a
# line with one is fed on its own (restart, bar, traceback, torchrun table, checkpoint, init,
# NCCL, and what would make a step candidate "not a step").
_NOT_PLAIN = (
    b"\x00",
    b"\x1b",
    b"Epoch ",
    b"Training: ",
    TRACEBACK_START.encode(),
    b'File "',
    b"exitcode",
    b"Root Cause",
    b"Failures:",
    b"heckpoint",
    b"global_step",
    b"aving model",
    b"ckpt",
    b"event=",
    b"processes registered",
    b"Init COMPLETE",
    b"nitializing distributed",
    b"store-based barrier",
    b"NCCL",
    b"rror",
    b"xception",
    b"%|",
)


def plain_words(shape: bytes) -> bool:
    """A line of this shape (``line_shape``) holds none of the words that make a line more
    than a plain step to the scan (``LineScanner.feed_run``): a word in the text is in its
    shape too (the shape only lacks the digits)."""
    return not any(word in shape for word in _NOT_PLAIN)
