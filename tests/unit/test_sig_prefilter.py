"""Anchor choice: every keyword is covered, anchors avoid healthy text where they can."""

from __future__ import annotations

import re

from trainmedic.core.signatures.catalogue import load_catalogue
from trainmedic.core.signatures.prefilter import COMMON_STARTS, choose_anchors, trie_pattern


def _keywords() -> list[str]:
    strip = str.maketrans("", "", "0123456789")
    return sorted({k.translate(strip) for s in load_catalogue().signatures for k in s.keywords})


def test_every_keyword_contains_an_anchor() -> None:
    catalogue = load_catalogue()
    anchors = choose_anchors(_keywords(), "\n".join(catalogue.healthy_lines))
    every = anchors.scanned + anchors.checked
    for keyword in _keywords():
        assert any(anchor in keyword for anchor in every), keyword


def test_scanned_anchors_start_rare_and_checked_ones_are_few() -> None:
    catalogue = load_catalogue()
    anchors = choose_anchors(_keywords(), "\n".join(catalogue.healthy_lines))
    assert all(a[0] not in COMMON_STARTS for a in anchors.scanned)
    assert len(anchors.checked) <= 20
    assert not set(anchors.scanned) & set(anchors.checked)


def test_anchors_avoid_healthy_text() -> None:
    anchors = choose_anchors(["Connection refused", "ECONNREFUSED"], "Connected all rings")
    assert "Conn" not in anchors.scanned
    assert all(a not in "Connected all rings" for a in anchors.scanned)


def test_redundant_anchor_dropped_and_fallback_to_whole_keyword() -> None:
    anchors = choose_anchors(["nan", "nan iterations"], "number of nan iterations: 0")
    assert anchors.checked == ("nan",)
    assert anchors.scanned == ()


def test_trie_pattern_finds_each_word_and_nothing_else() -> None:
    words = ["Error", "Err", "Xid", "NaN", "NET/IB"]
    gate = re.compile(trie_pattern(words))
    for word in words:
        assert gate.search(f"-- {word} --")
    assert gate.search("all good: loss 1.5") is None
    assert gate.search("xx Er yy") is None
