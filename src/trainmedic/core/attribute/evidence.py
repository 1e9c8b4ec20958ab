"""The general evidence layer: a category for failures no signature and no mechanism knows.

It rests on the failure lines the scan kept (``logparse/evidence.py``: lines with failure words
that no catalogue signature matched, warnings and zero counts left out) and on nothing else.
Each category is scored by the cues of ``evidence_cues.toml`` found in those lines, earlier
lines counting more (the first failure line is the likeliest cause; what follows is mostly
its fallout); lines the job trained past (``SURVIVED_REPORTS`` progress lines after them) or
measured past (a result table's rows after them: ``logparse/results.py``) do not count. The
best category names the verdict with a confidence of at most ``EVIDENCE_CONFIDENCE`` (0.45,
under the policy's stop threshold: a guess restarts the job, never stops or shrinks it), and
the basis says that it is this layer speaking.

With failure lines but no cue, the verdict is a failure of unknown category (0.2): "no
failure" is reserved for inputs without any failure evidence.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from trainmedic.core.errors import ConfigError
from trainmedic.core.logparse.evidence import EvidenceLine
from trainmedic.core.model import Category, Event, EvidenceSource, Kind, Role
from trainmedic.core.tomlschema import build, parse_toml

EVIDENCE_CONFIDENCE = 0.45
"""The most the evidence layer ever claims."""

UNNAMED_CONFIDENCE = 0.2
"""Failure lines that name no category."""

SURVIVED_REPORTS = 20
"""A failure line followed by this many progress lines in its file did not end the job."""

SURVIVED_RESULTS = 1
"""A failure line followed by a result table's row: the tool went on to measure (a benchmark
prints its rows only when its runs complete; what ends it is printed after them)."""

MIN_SCORE = 1.0
"""Below this, the cues are too thin to name a category."""


@dataclass(frozen=True, slots=True)
class _CueEntry:
    id: str
    category: Category
    weight: float
    pattern: str
    examples: tuple[str, ...]
    counter_examples: tuple[str, ...] = ()
    hang: bool = False


@dataclass(frozen=True, slots=True)
class _CueFile:
    cue: tuple[_CueEntry, ...]


@dataclass(frozen=True, slots=True)
class Cue:
    id: str
    category: Category
    weight: float
    regex: re.Pattern[str]
    examples: tuple[str, ...]
    counter_examples: tuple[str, ...] = ()
    hang: bool = False


def parse_cues(text: str, origin: str = "evidence_cues.toml") -> tuple[Cue, ...]:
    entries = build(_CueFile, parse_toml(text, origin), origin).cue
    cues = []
    seen: set[str] = set()
    for entry in entries:
        if entry.id in seen:
            raise ConfigError(f"{origin}: duplicate cue id {entry.id}")
        seen.add(entry.id)
        try:
            regex = re.compile(entry.pattern)
        except re.error as exc:
            raise ConfigError(f"{origin}: cue {entry.id}: bad pattern: {exc}") from exc
        cues.append(
            Cue(
                entry.id,
                entry.category,
                entry.weight,
                regex,
                entry.examples,
                entry.counter_examples,
                entry.hang,
            )
        )
    return tuple(cues)


CUE_FILES = ("evidence_cues.toml", "evidence_cues_general.toml")
"""The cue tables, in order (the second holds the cues that read unfamiliar failure lines:
status tables, health checks, heartbeats, identities, queues, file-system clients)."""


@functools.cache
def default_cues() -> tuple[Cue, ...]:
    package = resources.files("trainmedic.core.attribute")
    cues: list[Cue] = []
    for name in CUE_FILES:
        cues += parse_cues(package.joinpath(name).read_text("utf-8"), name)
    ids = [c.id for c in cues]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ConfigError(f"{', '.join(CUE_FILES)}: duplicate cue ids {duplicates}")
    return tuple(cues)


@dataclass(frozen=True, slots=True)
class EvidenceFinding:
    category: Category
    kind: Kind
    confidence: float
    basis: str
    event: Event  # the first failure line that supports the category, as an event


def _factor(index: int) -> float:
    return 1.0 if index < 5 else 0.6 if index < 20 else 0.3


def read_evidence(
    lines: Sequence[EvidenceLine], total: int = 0, cues: Sequence[Cue] | None = None
) -> EvidenceFinding | None:
    """What the failure lines say, or ``None`` when there are none (that the job outlived)."""
    kept = [
        e
        for e in lines
        if e.progress_after < SURVIVED_REPORTS and e.results_after < SURVIVED_RESULTS
    ]
    if not kept:
        return None
    scores: dict[Category, float] = {}
    first: dict[Category, EvidenceLine] = {}
    hang = False
    table = default_cues() if cues is None else cues
    for index, line in enumerate(kept):
        text = _focus(line.text, table)
        for cue in table:
            if not cue.regex.search(text):
                continue
            hang = hang or cue.hang
            if cue.category is Category.UNKNOWN or cue.weight <= 0:
                continue
            scores[cue.category] = scores.get(cue.category, 0.0) + cue.weight * _factor(index)
            first.setdefault(cue.category, line)
    best = max(scores, key=lambda c: scores[c], default=None)
    kind = Kind.HANG if hang else Kind.CRASH
    count = max(total, len(kept))
    if best is None or scores[best] < MIN_SCORE:
        line = kept[0]
        return EvidenceFinding(
            Category.UNKNOWN,
            kind,
            UNNAMED_CONFIDENCE,
            f"evidence: {count} failure line(s) no signature knows, none naming a category; "
            f"first at {_where(line)}: {line.text[:120]!r}",
            _event(line, Category.UNKNOWN, kind),
        )
    share = scores[best] / sum(scores.values())
    confidence = round(min(EVIDENCE_CONFIDENCE, 0.25 + 0.2 * share), 2)
    line = first[best]
    ranked = ", ".join(f"{c.value} {s:.1f}" for c, s in sorted(scores.items(), key=lambda i: -i[1]))
    return EvidenceFinding(
        best,
        kind,
        confidence,
        f"evidence: {count} failure line(s) no signature knows; their words point to "
        f"{best.value} ({ranked}); first such line at {_where(line)}: {line.text[:120]!r}",
        _event(line, best, kind),
    )


# A node's recorded reason for being out of service (scontrol's "Reason=...", before the
# "[user@time]" stamp): whoever drained it wrote the cause there.
_REASON = re.compile(r"\bReason=(?P<reason>.+?)\s*(?:\[[^\]]*\]\s*)?$")


def _focus(text: str, cues: Sequence[Cue]) -> str:
    """The part of a line its cues should read: a node's drain/down reason when that names a
    part of the machine (a GPU's Xid, a DIMM, a link), so that the scheduler's own words on the
    same line (State=DRAIN, Reason=) do not outvote the diagnosis written into it."""
    m = _REASON.search(text)
    if m is None:
        return text
    reason = m.group("reason")
    named = any(c.category.is_hardware() and c.weight > 0 and c.regex.search(reason) for c in cues)
    return reason if named else text


def _where(line: EvidenceLine) -> str:
    return f"{line.source or 'line'}:{line.line}"


def _event(line: EvidenceLine, category: Category, kind: Kind) -> Event:
    return Event(
        signature=f"evidence.{category.value}",
        category=category,
        kind=kind,
        role=Role.PRIMARY,
        line=line.line,
        text=line.text,
        source=line.source,
        evidence=EvidenceSource.APP_LOG,
    )
