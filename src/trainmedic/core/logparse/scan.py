"""One pass over one file's lines: matched events with their surroundings, and the job's shape.

Pure: it takes an iterable of raw ``bytes`` lines (the caller opens and streams the file) and
returns values. What it keeps is bounded (``ScanLimits``): at most ``max_events`` events, a
window of neighbour lines for the first ``max_windows`` of them, and a few progress lines.

Besides the catalogue's hits, every line feeds (cheaply, behind substring gates) the structured
parsers (``structured.py``: ibstat, nvidia-smi, dcgmi, Slurm and Kubernetes tables, the BMC's
event log), the collector of unexplained failure evidence (``evidence.py``), the time
structure (``timeline.py``) and what the ranks say about their collectives (``collective.py``).
Kernel-evidence rules and the event collector live in ``collect.py``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from trainmedic.core.logparse.collect import Collector, ScanLimits
from trainmedic.core.logparse.collective import CollectiveTrace, CollectiveTracker
from trainmedic.core.logparse.elastic import ChildFailure, ChildFailureTracker
from trainmedic.core.logparse.evidence import EvidenceCollector, EvidenceLine, may_be_evidence
from trainmedic.core.logparse.prefix import REFERENCE_YEAR, full_date_year, parse_prefix
from trainmedic.core.logparse.stackdump import StackDump, StackDumpTracker
from trainmedic.core.logparse.structured import StructuredScan
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.timeline import Timeline, TimelineTracker
from trainmedic.core.logparse.traceback import START as TRACEBACK_START
from trainmedic.core.logparse.traceback import TracebackTracker
from trainmedic.core.logparse.tracker import ProgressTracker
from trainmedic.core.model import Event
from trainmedic.core.signatures.matcher import Matcher, default_matcher, line_shape

__all__ = ["FileScan", "ScanLimits", "scan_lines"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]")
_RANK_LEAD = re.compile(r"\[rank(\d{1,6})\]:")
_MAX_RANKS = 100_000
_SHAPES = 1 << 14
_SHAPE_MAX = 4096  # longer lines are not memoised (the matcher's own bound)
_EVIDENCE, _STRUCTURED, _PROGRESS, _TIMELINE, _COLLECTIVE, _STACK = 1, 2, 4, 8, 16, 32


def _kinds(raw: bytes, text: str, structured: StructuredScan) -> int:
    """Which trackers want a line: a function of its *shape* (no trigger holds a digit), so the
    scan asks once per shape, and a large log repeats few shapes."""
    return (
        (_EVIDENCE if may_be_evidence(raw) else 0)
        | (_STRUCTURED if structured.wants(text) else 0)
        | (_PROGRESS if TimelineTracker.is_candidate(text) else 0)
        | (_TIMELINE if TimelineTracker.wants(text) else 0)
        | (_COLLECTIVE if CollectiveTracker.wants(text) else 0)
        | (_STACK if StackDumpTracker.wants(text) else 0)
    )


@dataclass(frozen=True, slots=True)
class FileScan:
    path: str
    lines: int
    events: tuple[Event, ...]
    neighbours: dict[Event, str] = field(default_factory=dict)
    windows: dict[Event, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    progress: ProgressSummary = field(default_factory=ProgressSummary)
    child_failures: tuple[ChildFailure, ...] = ()
    ranks_seen: frozenset[int] = frozenset()
    # progress lines printed in this file after each event: a job that kept training survived it
    progress_after: dict[Event, int] = field(default_factory=dict)
    year: int | None = None  # of the first full date seen (year-less stamps used it)
    evidence: tuple[EvidenceLine, ...] = ()  # failure lines no signature explained
    evidence_count: int = 0
    timeline: Timeline = field(default_factory=Timeline)
    collectives: CollectiveTrace = field(default_factory=CollectiveTrace)
    stack_dumps: tuple[StackDump, ...] = ()  # faulthandler / py-spy thread dumps


IGNORED_MARK = "Exception ignored in"
"""Python's header for an exception it printed and then ignored (``__del__``, atexit, GC):
the traceback that follows never ended the program, so its exception line is no event."""

MATCH_CHARS = 16384
"""Longer lines are matched on their head and tail only: an error lands at one end of a
monster line (a ``\r``-updated progress bar ends with the message printed after it)."""


def _view(text: str) -> str:
    if len(text) <= MATCH_CHARS:
        return text
    half = MATCH_CHARS // 2
    return text[:half] + "\n" + text[-half:]


WRAP_MIN = 80
"""Shorter lines are never taken for terminal-wrapped ones."""


def _is_wrap(prev: str, text: str, widths: dict[int, int]) -> bool:
    """Whether ``text`` continues ``prev``, a line cut by a terminal at its width.

    A pasted terminal cuts every long line at one width, mid-word: ``prev`` has a width seen
    at least twice, ends inside a word, ``text`` starts inside one and carries no prefix.
    """
    width = len(prev)
    if width < WRAP_MIN or widths.get(width, 0) < 2 or not text:
        return False
    if not (prev[-1].isalnum() and text[0].isalnum()):
        return False
    return parse_prefix(text).body_start == 0


def scan_lines(
    raw_lines: Iterable[bytes],
    path: str,
    node_hint: str | None = None,
    limits: ScanLimits | None = None,
    matcher: Matcher | None = None,
) -> FileScan:
    limits = limits or ScanLimits()
    matcher = matcher or default_matcher()
    match = matcher.match
    out = Collector(path, node_hint, limits, matcher)
    structured = StructuredScan()
    evidence = EvidenceCollector(path)
    timeline = TimelineTracker()
    collectives = CollectiveTracker()
    stacks = StackDumpTracker()
    shapes: dict[bytes, int] = {}  # line shape -> which trackers want such lines
    ring: deque[tuple[int, str]] = deque(maxlen=limits.window_before)
    tracebacks = TracebackTracker()
    failures = ChildFailureTracker()
    failure_lines = 0  # lines left in which torchrun's table may continue
    child: list[ChildFailure] = []
    year: int | None = None
    progress = ProgressTracker()
    widths: dict[int, int] = {}
    prev = ""
    ignoring = False  # inside a traceback that follows "Exception ignored in: ..."
    line_no = 0
    for raw in raw_lines:
        line_no += 1
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        if "\x00" in text:
            text = text.replace("\x00", "")
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        shape = line_shape(text) if len(text) <= _SHAPE_MAX else b""
        kinds = shapes.get(shape) if shape else None
        if kinds is None:
            kinds = _kinds(raw, text, structured)
            if shape and len(shapes) < _SHAPES:
                shapes[shape] = kinds
        if out.pending:
            out.neighbour(line_no, text)
        frames = ""
        ignored = False  # the exception line of a traceback Python says it ignored
        if TRACEBACK_START in text or tracebacks.active:
            if TRACEBACK_START in text:
                ignoring = IGNORED_MARK in prev
            unit = tracebacks.feed(line_no, text[parse_prefix(text).body_start :])
            if unit is not None:
                frames = unit.frames_text()
                ignored, ignoring = ignoring, False
        if failure_lines > 0 or "exitcode" in text or "Root Cause" in text or "Failures:" in text:
            failure_lines = 40 if "Failures:" in text or "Root Cause" in text else failure_lines - 1
            entry = failures.feed(line_no, text[parse_prefix(text).body_start :])
            if entry is not None:
                child.append(entry)
        if year is None and line_no <= 500:
            year = full_date_year(text)
        if not tracebacks.active:  # frames ("train_step(...)") are never progress
            progress.observe(line_no, text)
        if text[:5] == "[rank":  # a rank that only prints ordinary lines is still alive
            seen = _RANK_LEAD.match(text)
            if seen is not None and len(out.ranks) < _MAX_RANKS:
                out.ranks.add(int(seen.group(1)))
        width = len(text)
        if width >= WRAP_MIN:
            widths[width] = widths.get(width, 0) + 1
        out.reports_now = progress.reports
        if (
            len(prev) >= WRAP_MIN
            and text[:1].isalnum()
            and prev[-1].isalnum()
            and _is_wrap(prev, text, widths)
        ):
            joined = prev + text
            hits = match(_view(joined))
            if hits:
                out.drop_line(line_no - 1)
                before = list(ring)[:-1]
                out.add(hits, line_no - 1, joined, year or REFERENCE_YEAR, before, frames)
        else:
            hits = ()
        if not hits:
            # Not a wrap that completes a match (lines of one format often share a width):
            # the line stands on its own.
            hits = () if ignored else match(text, shape) if shape else match(_view(text))
            if hits:
                out.add(hits, line_no, text, year or REFERENCE_YEAR, list(ring), frames)
            elif kinds & _EVIDENCE and not tracebacks.active and not ignored:
                start = parse_prefix(text).body_start
                evidence.feed(line_no, text[start:], progress.reports, text[:start])
        if kinds & _STRUCTURED or structured.live:
            found = structured.feed(line_no, text, bool(kinds & _STRUCTURED))
            if found:
                out.add_findings(found, line_no, text, year or REFERENCE_YEAR, list(ring))
        if kinds & (_PROGRESS | _TIMELINE) and not tracebacks.active:
            if kinds & _PROGRESS:
                timeline.candidate(line_no, text)
            if kinds & _TIMELINE:
                timeline.observe(line_no, text)
        if kinds & _COLLECTIVE:
            collectives.observe(line_no, text)
        if kinds & _STACK or stacks.active:
            stacks.feed(line_no, text[parse_prefix(text).body_start :])
        ring.append((line_no, text[: limits.window_chars]))
        prev = text
    tail = failures.close()
    if tail is not None:
        child.append(tail)
    neighbours, windows = out.windows()
    total = progress.reports
    return FileScan(
        path=path,
        lines=line_no,
        events=tuple(out.events),
        neighbours=neighbours,
        windows=windows,
        progress=progress.summary(),
        child_failures=tuple(child),
        ranks_seen=frozenset(out.ranks),
        progress_after={e: total - at for e, at in zip(out.events, out.reports_at, strict=True)},
        year=year,
        evidence=evidence.lines(total),
        evidence_count=evidence.count,
        timeline=timeline.timeline(line_no, path),
        collectives=collectives.trace(),
        stack_dumps=stacks.dumps(),
    )
