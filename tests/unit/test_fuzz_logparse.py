"""Property-based tests (hypothesis) of every log-line parser: line prefixes, progress (text
and JSONL), checkpoint lines, tracebacks, torchrun failure tables and the signature matcher.

Whatever the line, each parser returns (no exception escapes), in bounded time, and what it
returns is in range: an iteration fits the store's 64-bit column, a prefix ends inside the
line. Lines are built from the fragments real logs and hostile ones are made of (prefixes,
keywords, long digit runs, brackets, odd characters), so the search reaches the branches."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmedic.core.logparse.checkpoint import parse_checkpoint
from trainmedic.core.logparse.elastic import ChildFailureTracker
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.progress import parse_progress, parse_progress_json
from trainmedic.core.logparse.traceback import TracebackTracker
from trainmedic.core.signatures.matcher import default_matcher

# More with TRAINMEDIC_FUZZ_EXAMPLES=2000 (the default keeps the unit suite quick).
EXAMPLES = int(os.environ.get("TRAINMEDIC_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
LIMIT = 10**18

FRAGMENTS = [
    "[rank",
    "[default",
    "]:",
    "[",
    "]",
    "(",
    ")",
    ": ",
    "=",
    ",",
    "/",
    "|",
    "%|",
    "\r",
    "\t",
    " ",
    "  ",
    "iter=",
    "iter ",
    "step ",
    "Step ",
    "iteration ",
    "loss=",
    "loss: ",
    "nan",
    "inf",
    "1e400",
    "-",
    "+",
    ".",
    "<",
    "it/s",
    "s/it",
    "{'loss': ",
    "'step': ",
    "}",
    '"iteration": ',
    "Mar  7 04:58:42 node1 kernel: ",
    "2024-03-07T04:58:42.954Z ",
    "[E0307 05:30:20.036 ",
    "node7:1234:1290 [3] NCCL INFO ",
    "(RayWorkerWrapper pid=4009, ip=10.0.0.5) ",
    "Traceback (most recent call last):",
    '  File "train.py", line ',
    ", in ",
    "RuntimeError: ",
    "KeyError",
    "Failures:",
    "Root Cause",
    "[0]:",
    "  rank      : ",
    "  exitcode  : ",
    "(local_rank: ",
    "(pid: ",
    "checkpoint saved ",
    "saved checkpoint at iteration ",
    "global_step",
    "saving model to ",
    "step=",
    "NVRM: Xid (PCI:0000:5e:00): ",
    "79, ",
    "Permission denied",
    "[Errno 13] ",
    "exitcode",
    "Link is Down",
    "NCCL WARN ",
    "CUDA error: ",
    "\x00",
    "\udcff",
    "☃",
    "٣",
]


def _digits(n: int) -> st.SearchStrategy[str]:
    return st.integers(min_value=1, max_value=n).map(lambda k: "9" * k)


PIECES = st.one_of(
    st.sampled_from(FRAGMENTS),
    st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    _digits(6000),
    st.tuples(st.sampled_from(FRAGMENTS), st.integers(1, 3000)).map(lambda t: t[0] * t[1]),
)
LINES = st.lists(PIECES, max_size=12).map("".join)


@FUZZ
@given(LINES)
def test_prefix_parser_returns_a_prefix_inside_the_line(line: str) -> None:
    prefix = parse_prefix(line)
    assert 0 <= prefix.body_start <= len(line)
    assert prefix.rank is None or abs(prefix.rank) < LIMIT


@FUZZ
@given(LINES)
def test_progress_parser_returns_a_storable_iteration(line: str) -> None:
    progress = parse_progress(line[parse_prefix(line).body_start :])
    if progress is not None:
        assert 0 <= progress.iteration < LIMIT
        assert len(progress.label) <= 80


@FUZZ
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers(-(2**80), 2**80) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    ),
    st.integers(-(2**80), 2**80),
)
def test_progress_json_takes_only_storable_iterations(value: object, iteration: int) -> None:
    for doc in ({"iteration": iteration, "loss": value, "rank": value}, value):
        line = json.dumps(doc)
        progress = parse_progress_json(line)
        if progress is not None:
            assert abs(progress.iteration) < LIMIT
            assert progress.rank is None or abs(progress.rank) < LIMIT


@FUZZ
@given(LINES)
def test_checkpoint_parser_returns_a_storable_iteration(line: str) -> None:
    found = parse_checkpoint(line)
    assert found is None or 0 <= found < LIMIT


@FUZZ
@given(st.lists(LINES, max_size=15))
def test_traceback_and_torchrun_trackers_take_any_sequence_of_lines(lines: list[str]) -> None:
    tracebacks, failures = TracebackTracker(), ChildFailureTracker()
    tracebacks.feed(0, "Traceback (most recent call last):")
    failures.feed(0, "Failures:")
    for number, line in enumerate(lines, start=1):
        unit = tracebacks.feed(number, line)
        if unit is not None:
            assert len(unit.frames) <= 200 and unit.exception_line == number
        entry = failures.feed(number, line)
        for found in (entry, failures.close() if number == len(lines) else None):
            if found is not None:
                for value in (found.rank, found.local_rank, found.exitcode):
                    assert value is None or abs(value) < LIMIT


@FUZZ
@given(LINES)
def test_matcher_agrees_with_its_naive_self_on_any_line(line: str) -> None:
    matcher = default_matcher()
    assert matcher.match(line) == matcher.match_naive(line)
