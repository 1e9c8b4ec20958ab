"""The parsers' fast paths decide exactly what the slow paths decide.

``parse_prefix`` asks one combined expression whether any prefix starts where it stands
before trying them one by one: with the combined test made to always pass (the slow path),
every line of every log in ``tests/data`` and every fuzzed line parses the same.
"""

from __future__ import annotations

import re
from datetime import timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from test_fuzz_logparse import FUZZ, LINES

from trainmedic.core.logparse import prefix
from trainmedic.core.logparse.prefix import parse_prefix

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
