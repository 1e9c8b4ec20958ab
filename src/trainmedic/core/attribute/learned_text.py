"""The learned evidence layer's view of a log: normalised word and word-pair features (pure).

The classifier (``learned_model.py``) must learn how failures are worded, never which host,
path, job or number one log happened to print. So every line is lower-cased and, before it is
cut into words: URLs, file paths and dotted host names become ``<path>`` / ``<host>``, and any
word holding a digit (``gpu07``, ``0x1f``, ``10.0.0.3``, ``r8001``, an Xid's number) becomes
``<n>``. What is left are the words of the message. Features are the distinct words and
adjacent word pairs of a line (``w:cuda``, ``b:illegal memory``), counted once per log.

The input is a bounded sample of the log (``LineSample``: the head and tail of each file):
the features of a 2 GB log cost what those of a small one do.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Iterable

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
_PATH = re.compile(r"(?:~|\.{1,2})?(?:/[\w.@%+=:,-]+){2,}/?|\b[a-z]:\\[^\s]+")
_HOST = re.compile(
    r"\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|edu|gov|io|ai|local|internal|lan|cluster|de|fr|uk|"
    r"cn|jp|ch|it|nl|us)\b"
)
_WORD = re.compile(r"[a-z0-9_]+")
_DIGIT = re.compile(r"\d")

NUMBER = "<n>"
MIN_WORD = 2
"""Shorter words (single letters) say nothing about a failure."""

MAX_FEATURE_LINE = 2000
"""Characters of one line read for features (the head of a long line)."""


def words(line: str) -> list[str]:
    """The normalised words of one line, placeholders in place of what is specific."""
    text = line[:MAX_FEATURE_LINE].lower()
    text = _URL.sub(" <path> ", text)
    text = _PATH.sub(" <path> ", text)
    text = _HOST.sub(" <host> ", text)
    out: list[str] = []
    for chunk in re.split(r"(<path>|<host>)", text):
        if chunk in ("<path>", "<host>"):
            out.append(chunk)
            continue
        for word in _WORD.findall(chunk):
            if _DIGIT.search(word):
                if not out or out[-1] != NUMBER:  # a run of numbers is one placeholder
                    out.append(NUMBER)
            elif len(word) >= MIN_WORD:
                out.append(word.strip("_") or NUMBER)
    return out


def features(lines: Iterable[str]) -> frozenset[str]:
    """The distinct word and adjacent-word-pair features of a log's lines."""
    found: set[str] = set()
    for line in lines:
        seq = words(line)
        found.update(f"w:{w}" for w in seq if w != NUMBER)
        found.update(f"b:{a} {b}" for a, b in itertools.pairwise(seq))
    return frozenset(found)


HEAD_LINES = 200
TAIL_LINES = 800
"""Lines of each file the sample keeps: the start (launch, set-up) and the end (the failure)."""


class LineSample:
    """Collects the head and the tail of one file's lines with bounded memory."""

    def __init__(self, head: int = HEAD_LINES, tail: int = TAIL_LINES) -> None:
        self._head_max = head
        self._head: list[bytes] = []
        self._tail: deque[bytes] = deque(maxlen=tail)

    def add(self, raw: bytes) -> None:
        if len(self._head) < self._head_max:
            self._head.append(raw)
        else:
            self._tail.append(raw)

    def lines(self) -> tuple[str, ...]:
        return tuple(
            raw.decode("utf-8", "replace").rstrip("\r\n").replace("\x00", "")
            for raw in (*self._head, *self._tail)
        )


def sample_text(text: str) -> tuple[str, ...]:
    """The sample ``LineSample`` would keep of a file holding ``text``."""
    sample = LineSample()
    for line in text.splitlines():
        sample.add(line.encode("utf-8", "replace"))
    return sample.lines()
