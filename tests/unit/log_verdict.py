"""What ``analyze`` makes of one log given as text: the helper the mechanism tests share
(each writes a short log in a wording of its own and asserts the verdict)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from trainmedic.core.model import Category, Kind, Verdict
from trainmedic.offline.analyze import analyze_path


def verdict_of(tmp_path: Path, text: str) -> Verdict:
    """``analyze`` of ``text`` written as ``tmp_path/job.log``."""
    path = tmp_path / "job.log"
    path.write_text(text)
    return analyze_path(path).verdict


def assert_mechanism(tmp_path: Path, name: str, case: tuple[str, Category, Kind]) -> None:
    """The log ``case[0]`` is a failure of category ``case[1]`` and kind ``case[2]``."""
    text, category, kind = case
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure, name
    assert verdict.category is category, (name, verdict)
    assert verdict.kind is kind, (name, verdict)


def assert_healthy(tmp_path: Path, name: str, text: str) -> None:
    """The log ``text`` holds no failure."""
    verdict = verdict_of(tmp_path, text)
    assert not verdict.failure, (name, verdict)


CaseTest = Callable[[Path, str], None]


def family_test(cases: Mapping[str, tuple[str, Category, Kind]]) -> CaseTest:
    """One parametrised test over a fix round's table of failure wordings: each must be read as
    its category and kind. A module binds it to a ``test_`` name, so each round's table is
    declared once and tested the same way."""

    @pytest.mark.parametrize("name", sorted(cases))
    def test(tmp_path: Path, name: str) -> None:
        assert_mechanism(tmp_path, name, cases[name])

    return test


def healthy_test(texts: Mapping[str, str]) -> CaseTest:
    """One parametrised test over a fix round's healthy counter-cases: none is a failure."""

    @pytest.mark.parametrize("name", sorted(texts))
    def test(tmp_path: Path, name: str) -> None:
        assert_healthy(tmp_path, name, texts[name])

    return test


def lookalike_test(cases: Mapping[str, tuple[str, Category]]) -> CaseTest:
    """One parametrised test over look-alikes: each is still a failure, but not of the category
    named beside it (a line shaped like a mechanism's that another cause printed)."""

    @pytest.mark.parametrize("name", sorted(cases))
    def test(tmp_path: Path, name: str) -> None:
        text, not_category = cases[name]
        verdict = verdict_of(tmp_path, text)
        assert verdict.failure, (name, verdict)
        assert verdict.category is not not_category, (name, verdict)

    return test
