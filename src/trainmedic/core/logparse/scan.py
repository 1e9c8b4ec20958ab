"""One pass over one file's lines: matched events with their surroundings, and the job's shape.

Pure: it takes an iterable of raw ``bytes`` lines (the caller opens and streams the file) and
returns values. What it keeps is bounded (``ScanLimits``): at most ``max_events`` events, a
window of neighbour lines for the first ``max_windows`` of them, and a few progress lines.

``LineScanner`` is the same scan fed a line at a time (the live engine feeds it what a job
log grows by) and split into attempts at the workload's restart lines (``attempts.py``).

Which lines are kernel evidence: every line of a file named like a kernel log
(``kern.log``, ``dmesg``, ``syslog``, ``messages``, ``journal``), and any line whose prefix is a
syslog ``kernel:`` tag or a dmesg stamp, or whose message starts with ``NVRM:``. For the live
service, only the node's kernel-log source counts; offline, the files given are all we have.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from trainmedic.core.logparse.attempts import AttemptSplitter, announcing_rank, is_restart_line
from trainmedic.core.logparse.elastic import ChildFailure, ChildFailureTracker
from trainmedic.core.logparse.prefix import REFERENCE_YEAR, full_date_year, parse_prefix
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.traceback import START as TRACEBACK_START
from trainmedic.core.logparse.traceback import TracebackTracker
from trainmedic.core.logparse.tracker import ProgressTracker
from trainmedic.core.model import Event, EvidenceSource
from trainmedic.core.signatures.matcher import Hit, Matcher, default_matcher

_KERNEL_FILE = re.compile(
    r"(?i)(?:^|[._-])(?:kern|kernel|dmesg|syslog|messages|journal)(?:[._-]|$)"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]")
# dmesg uptime stamps; a 10-digit "[1712003311.228100]" is epoch time (UCX), not a kernel line.
_KERNEL_PREFIX = re.compile(r"kernel: |^\s*\[\s*\d{1,8}\.\d+\]")
_KERNEL_BODY = (
    "NVRM:",
    "pcieport",
    "mlx5_core",
    "EDAC",
    "mce:",
    "nvidia-nvswitch",
    "amdgpu",
    "[drm:",
)
_RANK_LEAD = re.compile(r"\[rank(\d{1,6})\]:")
_MAX_RANKS = 100_000
_NODE_FIELD = re.compile(r"node=([\w.-]+)\s")
_RANK_FILE = re.compile(r"(?i)(?:rank|default|worker|proc)[._-]?(\d{1,5})(?:\D|$)")


@dataclass(frozen=True, slots=True)
class ScanLimits:
    max_line_bytes: int = 64 * 1024
    max_events: int = 5000
    max_windows: int = 200
    window_before: int = 8
    window_after: int = 6
    window_chars: int = 400


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
    # The kept attempt starts after this line (0: the file's first line); its restart line's
    # own timestamp, when it has one (files without restart lines are aligned on it).
    attempt_line: int = 0
    attempt_started: float | None = None


class _Pending:
    __slots__ = ("after", "before", "event", "frames", "line")

    def __init__(self, event: Event, line: int, before: list[tuple[int, str]], frames: str):
        self.event, self.line, self.before, self.frames = event, line, before, frames
        self.after: list[tuple[int, str]] = []


def _file_rank(path: str) -> int | None:
    m = _RANK_FILE.search(path.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


MAX_EVENT_TEXT = 4096
"""Characters of a matched line kept in its event (5000 events of 64 KiB would be 320 MB)."""

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
    if text[4:5] == "-" and text[:4].isdigit():
        return False  # an ISO date ("2026-11-29T..."): a line of its own, never a cut
    return parse_prefix(text).body_start == 0


class _Collector:
    """Builds events from hits and keeps their windows (bounded by ``ScanLimits``)."""

    def __init__(self, path: str, node_hint: str | None, limits: ScanLimits, m: Matcher):
        self.path, self.node_hint, self.limits, self.to_event = path, node_hint, limits, m.to_event
        self.kernel_file = bool(_KERNEL_FILE.search(path.rsplit("/", 1)[-1]))
        self.kernel_prefixes = True  # a kernel-style prefix or message makes kernel evidence
        self.file_rank = _file_rank(path)
        self.events: list[Event] = []
        self.pending: list[_Pending] = []
        self.done: list[_Pending] = []
        self.ranks: set[int] = set() if self.file_rank is None else {self.file_rank}
        self.reports_at: list[int] = []  # progress reports seen when each event was found
        self.reports_now = 0

    def add(
        self,
        hits: tuple[Hit, ...],
        line_no: int,
        text: str,
        year: int,
        before: list[tuple[int, str]],
        frames: str,
    ) -> None:
        prefix = parse_prefix(text, year)
        if prefix.rank is not None:
            self.ranks.add(prefix.rank)
        if prefix.node is None:
            # a "node=node2 ..." field leading the message (the example trainer's lines)
            said = _NODE_FIELD.match(text, prefix.body_start)
            node = said.group(1) if said is not None else self.node_hint
            if node is not None:
                prefix = replace(prefix, node=node)
        body = text[prefix.body_start :]
        kernel = self.kernel_file or (
            self.kernel_prefixes
            and (
                bool(_KERNEL_PREFIX.search(text, 0, prefix.body_start + 1))
                or body.startswith(_KERNEL_BODY)
            )
        )
        evidence = EvidenceSource.KERNEL_LOG if kernel else EvidenceSource.APP_LOG
        for hit in hits:
            if len(self.events) >= self.limits.max_events:
                return
            event = self.to_event(
                hit,
                line=line_no,
                text=text[:MAX_EVENT_TEXT],
                source=self.path,
                evidence=evidence,
                prefix=prefix,
            )
            if event.rank is None and self.file_rank is not None:
                event = replace(event, rank=self.file_rank)
            self.events.append(event)
            self.reports_at.append(self.reports_now)
            if len(self.done) + len(self.pending) < self.limits.max_windows:
                self.pending.append(_Pending(event, line_no, before, frames))

    def drop_line(self, line_no: int) -> None:
        """Forget the events of ``line_no`` (it is about to be matched again, joined)."""
        keep = [i for i, e in enumerate(self.events) if e.line != line_no]
        self.events = [self.events[i] for i in keep]
        self.reports_at = [self.reports_at[i] for i in keep]
        self.pending = [p for p in self.pending if p.line != line_no]

    def neighbour(self, line_no: int, text: str) -> None:
        limits = self.limits
        for p in self.pending:
            p.after.append((line_no, text[: limits.window_chars]))
        if len(self.pending[0].after) >= limits.window_after:
            self.done.extend(p for p in self.pending if len(p.after) >= limits.window_after)
            self.pending = [p for p in self.pending if len(p.after) < limits.window_after]

    def windows(self) -> tuple[dict[Event, str], dict[Event, tuple[tuple[int, str], ...]]]:
        neighbours: dict[Event, str] = {}
        windows: dict[Event, tuple[tuple[int, str], ...]] = {}
        for p in (*self.done, *self.pending):
            around = (*p.before, (p.line, p.event.text[: self.limits.window_chars]), *p.after)
            windows[p.event] = around
            text = "\n".join(t for _, t in around)
            neighbours[p.event] = text + ("\n" + p.frames if p.frames else "")
        return neighbours, windows


class LineScanner:
    """The scan of one file, fed a line at a time: ``scan_lines`` for a whole file, the live
    engine for the lines a job log grows by. ``result()`` may be called at any time.

    A line that announces a restart of the workload (``attempts.is_restart_line``) begins a
    new attempt: what the scanner kept of the earlier one (events, windows, progress, the
    failure table, ranks) is dropped, so a log that spans attempts is judged on its last.
    ``kernel_lines=False`` (the live service's job logs) never takes a line for kernel
    evidence, whatever it looks like: only a node's own kernel-log source is trusted there.
    """

    def __init__(
        self,
        path: str,
        node_hint: str | None = None,
        limits: ScanLimits | None = None,
        matcher: Matcher | None = None,
        *,
        kernel_lines: bool = True,
    ) -> None:
        self.path, self.node_hint = path, node_hint
        self.limits = limits or ScanLimits()
        self.matcher = matcher or default_matcher()
        self._match = self.matcher.match
        self._window_chars = self.limits.window_chars
        self.kernel_lines = kernel_lines
        self.line_no = 0
        self.year: int | None = None
        self._widths: dict[int, int] = {}
        self._prev = ""
        self._splitter = AttemptSplitter()
        self._new_attempt(None)

    def _new_attempt(self, started: float | None) -> None:
        self.out = _Collector(self.path, self.node_hint, self.limits, self.matcher)
        if not self.kernel_lines:
            self.out.kernel_file = False
            self.out.kernel_prefixes = False
        self._ring: deque[tuple[int, str]] = deque(maxlen=self.limits.window_before)
        self._tracebacks = TracebackTracker()
        self._failures = ChildFailureTracker()
        self._failure_lines = 0  # lines left in which torchrun's table may continue
        self._child: list[ChildFailure] = []
        self._progress = ProgressTracker()
        self._ignoring = False  # inside a traceback that follows "Exception ignored in: ..."
        self.attempt_line = self.line_no  # the line the current attempt starts after
        self.attempt_started = started  # the restart line's own timestamp, when it has one

    @property
    def steps(self) -> int:
        """Training steps this attempt's lines reported so far."""
        return self._progress.reports

    def feed_raw(self, raw: bytes) -> tuple[Event, ...]:
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        return self.feed(text)

    def feed(self, text: str, line_no: int | None = None) -> tuple[Event, ...]:
        """Scan one line (``line_no``: its number in the file, else the next); the events
        found on it (a wrapped line's join included)."""
        self.line_no = line_no = self.line_no + 1 if line_no is None else line_no
        if "\x00" in text:
            text = text.replace("\x00", "")
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        # A line reporting a loss is a step, not a restart: most lines skip the check.
        if "loss" not in text and is_restart_line(text):
            prefix = parse_prefix(text, self.year or REFERENCE_YEAR)
            rank = announcing_rank(text, prefix.rank)
            if self._splitter.boundary(rank, self._progress.reports):
                self.line_no = line_no - 1
                self._new_attempt(prefix.timestamp)
                self.line_no = line_no
        out, progress, widths = self.out, self._progress, self._widths
        if out.pending:
            out.neighbour(line_no, text)
        frames = ""
        ignored = False  # the exception line of a traceback Python says it ignored
        tracebacks = self._tracebacks
        if TRACEBACK_START in text or tracebacks.active:
            if TRACEBACK_START in text:
                self._ignoring = IGNORED_MARK in self._prev
            unit = tracebacks.feed(line_no, text[parse_prefix(text).body_start :])
            if unit is not None:
                frames = unit.frames_text()
                ignored, self._ignoring = self._ignoring, False
        if (
            self._failure_lines > 0
            or "exitcode" in text
            or "Root Cause" in text
            or "Failures:" in text
        ):
            table = "Failures:" in text or "Root Cause" in text
            self._failure_lines = 40 if table else self._failure_lines - 1
            entry = self._failures.feed(line_no, text[parse_prefix(text).body_start :])
            if entry is not None:
                self._child.append(entry)
        if self.year is None and line_no <= 500:
            self.year = full_date_year(text)
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
        prev, year = self._prev, self.year or REFERENCE_YEAR
        found = len(out.events)
        if (
            len(prev) >= WRAP_MIN
            and text[:1].isalnum()
            and prev[-1].isalnum()
            and _is_wrap(prev, text, widths)
        ):
            joined = prev + text
            hits = self._match(_view(joined))
            if hits:
                out.drop_line(line_no - 1)
                found = min(found, len(out.events))
                before = list(self._ring)[:-1]
                out.add(hits, line_no - 1, joined, year, before, frames)
        else:
            hits = () if ignored else self._match(text if width <= MATCH_CHARS else _view(text))
            if hits:
                out.add(hits, line_no, text, year, list(self._ring), frames)
        if len(out.events) != found:
            progress.screen = True  # steps now count towards "training went on past it"
        self._ring.append((line_no, text[: self._window_chars]))
        self._prev = text
        return tuple(out.events[found:]) if len(out.events) != found else ()

    def result(self) -> FileScan:
        """What the current attempt's lines say so far (the scanner can go on)."""
        out = self.out
        child = list(self._child)
        tail = copy.copy(self._failures).close()  # a table still being printed counts
        if tail is not None:
            child.append(tail)
        neighbours, windows = out.windows()
        total = self._progress.reports
        return FileScan(
            path=self.path,
            lines=self.line_no,
            events=tuple(out.events),
            neighbours=neighbours,
            windows=windows,
            progress=self._progress.summary(),
            child_failures=tuple(child),
            ranks_seen=frozenset(out.ranks),
            progress_after={
                e: total - at for e, at in zip(out.events, out.reports_at, strict=True)
            },
            year=self.year,
            attempt_line=self.attempt_line,
            attempt_started=self.attempt_started,
        )


def scan_lines(
    raw_lines: Iterable[bytes],
    path: str,
    node_hint: str | None = None,
    limits: ScanLimits | None = None,
    matcher: Matcher | None = None,
) -> FileScan:
    """Scan a whole file (its raw lines, in order)."""
    scanner = LineScanner(path, node_hint, limits, matcher)
    feed = scanner.feed
    for raw in raw_lines:
        feed(raw.decode("utf-8", "replace").rstrip("\r\n"))
    return scanner.result()
