"""The parsers' fast paths decide exactly what the slow paths decide.

``parse_prefix`` asks one combined expression whether any prefix starts where it stands
before trying them one by one: with the combined test made to always pass (the slow path),
every line of every log in ``tests/data`` and every fuzzed line parses the same. The
timeline parses its kept candidates late: the same timeline as parsing each at once.
"""

from __future__ import annotations

import random
import re
from datetime import timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from test_fuzz_logparse import FUZZ, LINES

from trainmedic.core.logparse import prefix
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.timeline import LAST_POINTS, MAX_POINTS, Timeline, TimelineTracker

DATA = Path(__file__).resolve().parents[1] / "data"
NOW = 1_790_000_000.0
ZONE = timezone(timedelta(hours=-5))


def _corpus() -> list[str]:
    lines: list[str] = []
    for path in sorted(DATA.rglob("*")):
        if path.is_file() and path.suffix in (".log", ".txt", ".out", ".err"):
            lines.extend(path.read_text(errors="replace").splitlines())
    return lines


def _slow_and_fast(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for kwargs in ({}, {"now": NOW, "tz": ZONE}, {"year": 2026}):
        fast = parse_prefix(line, **kwargs)  # type: ignore[arg-type]
        with monkeypatch.context() as m:
            m.setattr(prefix, "_ANY_PEELED", re.compile(""))
            slow = parse_prefix(line, **kwargs)  # type: ignore[arg-type]
        assert fast == slow, line


def test_every_peeled_prefix_is_in_the_combined_test() -> None:
    used = {
        name
        for name in parse_prefix.__code__.co_names
        if isinstance(getattr(prefix, name, None), re.Pattern)
    }
    assert used - {"_ANY_PEELED", "_PDSH"} == {p_name(p) for p in prefix._PEELED}


def p_name(pattern: re.Pattern[str]) -> str:
    (name,) = [k for k, v in vars(prefix).items() if v is pattern]
    return name


def test_the_corpus_parses_the_same_without_the_combined_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corpus = _corpus()
    assert len(corpus) > 5000
    for line in corpus:
        _slow_and_fast(line, monkeypatch)


@FUZZ
@given(LINES)
def test_fuzzed_lines_parse_the_same_without_the_combined_test(line: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _slow_and_fast(line, monkeypatch)


def _timelines(lines: list[str]) -> tuple[Timeline, Timeline]:
    """The lazy tracker's timeline and that of one parsing each kept candidate at once."""
    lazy, eager = TimelineTracker(), TimelineTracker()
    for n, text in enumerate(lines, 1):
        if TimelineTracker.is_candidate(text):
            lazy.candidate(n, text)
            eager.candidate(n, text)
            eager._parse_pending()
    return lazy.timeline(len(lines)), eager.timeline(len(lines))


def test_the_timeline_parses_late_what_it_would_parse_at_once() -> None:
    rng = random.Random(5)
    shapes = [
        "[rank0] iter={i} loss={l} step_s=0.01",
        "step {i} loss {l}",
        "RuntimeError: failed at iteration {i}",  # a candidate that is no point
        "eval loss={l}",  # a loss without a step
        "checkpoint saved iter={i}",
        "  3%|▎  | {i}/1000 [00:03<00:30, 30.0it/s, loss={l}]",
        "step",  # a candidate with nothing to parse
    ]
    for length in (10, 63, 64, 65, 300, 320, 321, 2000, 9000):
        lines = [
            rng.choice(shapes).format(i=i, l=rng.choice(["0.5", "nan", "2.25"]))
            for i in range(length)
        ]
        lazy, eager = _timelines(lines)
        assert repr(lazy) == repr(eager), length  # repr: nan == nan
        assert len(lazy.points) <= MAX_POINTS + LAST_POINTS


def test_the_corpus_timelines_are_the_same_parsed_late() -> None:
    for path in sorted(DATA.rglob("*")):
        if path.is_file() and path.suffix in (".log", ".txt", ".out", ".err"):
            lazy, eager = _timelines(path.read_text(errors="replace").splitlines())
            assert repr(lazy) == repr(eager), path


def test_a_timeline_nobody_asks_for_parses_no_line_until_it_could_fill() -> None:
    tracker = TimelineTracker()
    for n in range(1, LAST_POINTS + MAX_POINTS):
        tracker.candidate(n, f"iter={n} loss=0.5")
    assert tracker._points == [] and len(tracker._pending) == MAX_POINTS - 1
    tracker.candidate(LAST_POINTS + MAX_POINTS, "iter=0 loss=0.5")
    assert tracker._pending == [] and len(tracker._points) == MAX_POINTS // 2  # halved
