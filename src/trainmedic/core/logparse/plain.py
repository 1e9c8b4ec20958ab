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


def _plain_line(rank: str, node: str) -> str:
    """``PLAIN`` without groups but for the rank's and node's (given)."""
    n = _NUMBER.replace("(", "(?:")
    return (
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{1,9}Z"
        rf" \[rank{rank}\] node={node} iter=\d{{1,15}} loss={n} step_s={n}"
        rf"(?: compute_s={n} wait_s={n})?(?: samples_per_s={n})?"
    )


_PLAIN_BLOCK = re.compile(
    _plain_line(r"(\d{1,6})", r"([A-Za-z][A-Za-z0-9_.-]{0,62})")
    + r"(?:\n"
    + _plain_line(r"\1", r"\2")
    + r")*"
)
"""``PLAIN`` lines (a match never spans two lines) joined by ``\n``, all of one rank and node
(back-references): one pass, no object per line."""

# A field of a line of a block ``_PLAIN_BLOCK`` matched, without its name: what ``PLAIN``'s
# group for it gives.
_ITERATION = operator.itemgetter(slice(len("iter="), None))
_LOSS = operator.itemgetter(slice(len("loss="), None))
_STEP_TIME = operator.itemgetter(slice(len("step_s="), None))
_COMPUTE_TIME = operator.itemgetter(slice(len("compute_s="), None))
_WAIT_TIME = operator.itemgetter(slice(len("wait_s="), None))
_SAMPLES_PER_S = operator.itemgetter(slice(len("samples_per_s="), None))


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
    texts: tuple[str, ...]  # the lines


def parse_plain_block(text: str, count: int) -> PlainColumns | None:
    """``count`` lines joined by ``\n``, when every one is plain and of one kind; else None
    (the caller reads them one by one). One regex pass to check them, one per column to read
    it, and the conversions column by column, at C speed: no Python code runs per line, and
    no object is made per line but its values (tuples per line were most of the cost, in
    time and in the garbage collector's work)."""
    m = _PLAIN_BLOCK.fullmatch(text)
    if m is None or text.count("\n") + 1 != count:
        return None  # a line that is not plain, or not of the first line's rank and node
    compute = text.count(" compute_s=")  # once in a line that has it, as samples_per_s=
    rate = text.count(" samples_per_s=")
    if compute not in (0, count) or rate not in (0, count):
        return None
    # The lines' fields, space-separated (a node name has no space): with the same fields
    # in every line, a column is every ``width``-th.
    fields = text.replace("\n", " ").split(" ")
    width = 6 + (2 if compute else 0) + (1 if rate else 0)
    stamps = _block_stamps(fields[::width])
    if stamps is None:
        return None
    rank, node = m.group(1), m.group(2)
    return PlainColumns(
        kind=(rank, node, not compute, not rate),
        rank=int(rank),
        node=node,
        stamps=stamps,
        iterations=tuple(map(int, map(_ITERATION, fields[3::width]))),
        losses=tuple(map(float, map(_LOSS, fields[4::width]))),
        step_times=tuple(map(float, map(_STEP_TIME, fields[5::width]))),
        compute_times=tuple(map(float, map(_COMPUTE_TIME, fields[6::width]))) if compute else None,
        wait_times=tuple(map(float, map(_WAIT_TIME, fields[7::width]))) if compute else None,
        samples_per_s=(
            tuple(map(float, map(_SAMPLES_PER_S, fields[width - 1 :: width]))) if rate else None
        ),
        texts=tuple(text.split("\n")),
    )


def _block_stamps(heads: list[str]) -> tuple[float, ...] | None:
    """Each plain line's printed time (``heads``: its stamps, ``YYYY-MM-DDTHH:MM:SS.fZ``);
    None when one is not a date. A block's lines share a stamp or a few: each distinct one
    is read once."""
    values: dict[str, float] = {}
    for head in set(heads):
        value = _stamp(head)
        if value is None:
            return None
        values[head] = value
    if len(values) == 1:
        return (values[heads[0]],) * len(heads)
    return tuple(map(values.__getitem__, heads))


def _stamp(head: str) -> float | None:
    """``YYYY-MM-DDTHH:MM:SS.fZ`` as ``parse_plain`` reads it; None when it is no date."""
    d = head[:19]  # as PLAIN's groups split it
    second = _SECONDS.get(d, -1.0)
    if second == -1.0:
        if len(_SECONDS) >= 4096:
            _SECONDS.clear()
        second = _SECONDS[d] = iso_seconds(d[:4], d[5:7], d[8:10], d[11:13], d[14:16], d[17:])
    return None if second is None else second + float("0." + head[20:-1])


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
