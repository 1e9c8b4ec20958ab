"""The matcher's prefilter: which short literals ("anchors") to look for before any regex.

Every keyword gets an anchor, a piece of it, so a line without any anchor holds no keyword and
can match no signature. How fast a line is rejected depends on the anchors' first characters:
the regex engine skips over characters that cannot start an anchor in a tight C loop and only
tries the alternation where one can. So anchors are chosen to

- start with a character rare in healthy logs (a capital, ``_``, ``<``, a rare letter): these
  are *scanned* with one trie-shaped regex;
- be absent from ``healthy`` text (typical lines of training logs kept in the catalogue);
- and, for the few keywords whose every piece starts with a common letter ("nan", "timed
  out"), form a small shared set that is *checked* with ``in`` (one C-level search each).

Anchors contain no digits: the matcher compares digit-free text (see matcher.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MIN_LENGTH = 3
MAX_LENGTH = 10
# Characters that start too many positions of a healthy line to be worth scanning for.
COMMON_STARTS = frozenset("etaoinsrhldcum .,:;|-=[]()'\"{}%+\t/")
# Among the others, rarer first is better (English letter frequency; capitals and symbols that
# healthy logs print often, as in "NCCL INFO" and "2.5E+00", come before the rest).
_LESS_RARE = "pfgwybvNCLIFOEPSkxjqz"


@dataclass(frozen=True, slots=True)
class Anchors:
    scanned: tuple[str, ...]  # start with a rare character: one regex
    checked: tuple[str, ...]  # start with a common one: a few ``in`` tests


def choose_anchors(keywords: Iterable[str], healthy: str) -> Anchors:
    """Anchors covering ``keywords`` (digit-free), kept out of ``healthy`` where possible."""
    lengths = range(MIN_LENGTH, MAX_LENGTH + 1)
    seen = {healthy[i : i + n] for n in lengths for i in range(len(healthy) - n + 1)}
    scanned: set[str] = set()
    leftover: dict[str, list[str]] = {}
    for keyword in keywords:
        quiet = [
            keyword[i : i + n]
            for n in lengths
            for i in range(len(keyword) - n + 1)
            if keyword[i : i + n] not in seen
        ] or [keyword]
        rare = [piece for piece in quiet if piece[0] not in COMMON_STARTS]
        if rare:
            scanned.add(max(rare, key=lambda piece: (_rarity(piece[0]), -len(piece))))
        else:
            leftover[keyword] = quiet
    checked = _cover(leftover)
    everything = scanned | checked
    # An anchor holding another is redundant: wherever it occurs, the shorter one does too.
    keep = {a for a in everything if not any(b != a and b in a for b in everything)}
    return Anchors(tuple(sorted(keep & scanned)), tuple(sorted(keep & checked)))


def _cover(pieces_by_keyword: dict[str, list[str]]) -> set[str]:
    """Few pieces that together cover every keyword (greedy set cover; longer on ties)."""
    uncovered = set(pieces_by_keyword)
    chosen: set[str] = set()
    while uncovered:
        options = {p for k in uncovered for p in pieces_by_keyword[k]}
        best = max(
            sorted(options),
            key=lambda piece: (sum(piece in k for k in uncovered), len(piece)),
        )
        chosen.add(best)
        uncovered = {k for k in uncovered if best not in k}
    return chosen


def _rarity(char: str) -> int:
    rank = _LESS_RARE.find(char)
    return len(_LESS_RARE) if rank < 0 else rank


def trie_pattern(words: Iterable[str]) -> str:
    """An alternation of ``words`` factored by common prefix. A word that is a prefix of another
    ends the branch (the gate needs to know that some anchor starts here, not which is longest),
    and factoring keeps the engine from retrying every word at every position."""
    trie: _Trie = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _trie_node(trie)


_Trie = dict[str, "_Trie"]


def _trie_node(node: _Trie) -> str:
    if "" in node:
        return ""
    branches = [re.escape(char) + _trie_node(node[char]) for char in sorted(node)]
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
