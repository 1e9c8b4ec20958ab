"""One pass over one file's lines: matched events with their surroundings, and the job's shape.

Pure: it takes an iterable of raw ``bytes`` lines (the caller opens and streams the file) and
returns values. What it keeps is bounded (``ScanLimits``): at most ``max_events`` events, a
window of neighbour lines for the first ``max_windows`` of them, and a few progress lines.

Besides the catalogue's hits, every line feeds (cheaply, behind substring gates) the structured
parsers (``structured.py``: ibstat, nvidia-smi, dcgmi, Slurm and Kubernetes tables, the BMC's
event log), the collector of unexplained failure evidence (``evidence.py``), the time
structure (``timeline.py``) and what the ranks say about their collectives (``collective.py``).
Kernel-evidence rules and the event collector live in ``collect.py``.

``LineScanner`` is the same scan fed a line at a time (the live engine feeds it what a job
log grows by) and split into attempts at the workload's restart lines (``attempts.py``).
"""

from __future__ import annotations

import copy
import operator
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from trainmedic.core.logparse.attempts import (
    AttemptSplitter,
    BarRestart,
    announcing_rank,
    is_restart_line,
)
from trainmedic.core.logparse.collect import Collector, ScanLimits
from trainmedic.core.logparse.collective import CollectiveTrace, CollectiveTracker
from trainmedic.core.logparse.elastic import ChildFailure, ChildFailureTracker
from trainmedic.core.logparse.evidence import EvidenceCollector, EvidenceLine, may_be_evidence
from trainmedic.core.logparse.loss_scale import LossScaleTracker
from trainmedic.core.logparse.plain import plain_words
from trainmedic.core.logparse.prefix import REFERENCE_YEAR, full_date_year, parse_prefix
from trainmedic.core.logparse.results import ResultTableTracker, may_be_table_row
from trainmedic.core.logparse.stackdump import StackDump, StackDumpTracker
from trainmedic.core.logparse.structured import StructuredScan
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.timeline import Parsed, Timeline, TimelineTracker
from trainmedic.core.logparse.traceback import START as TRACEBACK_START
from trainmedic.core.logparse.traceback import TracebackTracker
from trainmedic.core.logparse.tracker import ProgressTracker
from trainmedic.core.logparse.wrap import WRAP_MIN, is_wrap
from trainmedic.core.model import Event
from trainmedic.core.signatures.matcher import MAX_LINE, Matcher, default_matcher, line_shape

__all__ = ["FileScan", "LineScanner", "ScanLimits", "scan_lines"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]")
_RANK_LEAD = re.compile(r"\[rank(\d{1,6})\]:")
_MAX_RANKS = 100_000
_SHAPES = 1 << 14
_SHAPE_MAX = 4096  # longer lines are not memoised (the matcher's own bound)
_EVIDENCE, _STRUCTURED, _PROGRESS, _TIMELINE, _COLLECTIVE, _STACK = 1, 2, 4, 8, 16, 32
_RESULT, _SCALER = 64, 128
_PLAIN_STEP = 1 << 10  # (LineScanner._plain_shape) a line the progress tracker counts
_STEP_WORDS = ("iter", "step", "Iter", "Step")


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
        | (_RESULT if may_be_table_row(text) else 0)
        | (_SCALER if LossScaleTracker.wants(text) else 0)
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
    # The kept attempt starts after this line (0: the file's first line); its restart line's
    # own timestamp, when it has one (files without restart lines are aligned on it).
    attempt_line: int = 0
    attempt_started: float | None = None
    stack_dumps: tuple[StackDump, ...] = ()  # faulthandler / py-spy thread dumps
    kernel_log_of: str | None = None  # the node, when the file is that node's kernel log


KERNEL_LOG_NAMES = frozenset({"kern.log", "kernel.log", "dmesg", "dmesg.log", "messages", "syslog"})
"""File names of a node's kernel log (rotations ``kern.log.1``, ``.gz`` included), in a
``<node>/`` directory of what ``analyze`` reads."""


def is_kernel_log_name(path: str) -> bool:
    name = path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".gz")
    stem, _, rotation = name.rpartition(".")
    return name in KERNEL_LOG_NAMES or (rotation.isdigit() and stem in KERNEL_LOG_NAMES)


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


class LineScanner:
    """The scan of one file, fed a line at a time: ``scan_lines`` for a whole file, the live
    engine for the lines a job log grows by. ``result()`` may be called at any time.

    A line that announces a restart of the workload (``attempts.is_restart_line``), or a
    per-epoch bar drawn again from an earlier position (``attempts.BarRestart``), begins a
    new attempt: what the scanner kept of the earlier one (events, windows, progress, the
    failure table, ranks, unexplained evidence, structured blocks, time structure and
    collectives) is dropped, so a log that spans attempts is judged on its last.
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
        self._text_seen = False  # a line with text came already (see the headless traceback)
        self._shapes: dict[bytes, int] = {}  # line shape -> which trackers want such lines
        self._plain_shapes: dict[bytes, int] = {}  # line shape -> _plain_shape of such lines
        self._splitter = AttemptSplitter()
        self._new_attempt(None)

    def _new_attempt(self, started: float | None) -> None:
        self.out = Collector(self.path, self.node_hint, self.limits, self.matcher)
        if not self.kernel_lines:
            self.out.kernel_file = False
            self.out.kernel_prefixes = False
        self._ring: deque[tuple[int, str]] = deque(maxlen=self.limits.window_before)
        self._tracebacks = TracebackTracker()
        self._failures = ChildFailureTracker()
        self._failure_lines = 0  # lines left in which torchrun's table may continue
        self._child: list[ChildFailure] = []
        self._progress = ProgressTracker()
        self._structured = StructuredScan()
        self._evidence = EvidenceCollector(self.path)
        self._results = ResultTableTracker()
        self._timeline = TimelineTracker()
        self._collectives = CollectiveTracker()
        self._stacks = StackDumpTracker()
        self._scaler = LossScaleTracker()
        self._ignoring = False  # inside a traceback that follows "Exception ignored in: ..."
        self._bars = BarRestart()
        self.attempt_line = self.line_no  # the line the current attempt starts after
        self.attempt_started = started  # the restart line's own timestamp, when it has one

    @property
    def steps(self) -> int:
        """Training steps this attempt's lines reported so far."""
        return self._progress.reports

    def _bar_restarts(self, text: str) -> bool:
        """A per-epoch bar drawn again from an earlier position, after training went on."""
        return self._bars.restarts(text) and self._progress.reports > 0

    def feed_raw(self, raw: bytes) -> tuple[Event, ...]:
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        return self.feed(text, raw=raw)

    def feed(
        self, text: str, line_no: int | None = None, *, raw: bytes | None = None
    ) -> tuple[Event, ...]:
        """Scan one line (``line_no``: its number in the file, else the next; ``raw``: its
        bytes, when the caller has them); the events found on it (a wrapped line's join
        included)."""
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
        if ("Epoch " in text or "Training: " in text) and "|" in text and self._bar_restarts(text):
            self.line_no = line_no - 1
            self._new_attempt(None)
            self.line_no = line_no
            self._bar_restarts(text)  # the new attempt's first bar
        out, progress, widths = self.out, self._progress, self._widths
        structured = self._structured
        shape = line_shape(text) if len(text) <= _SHAPE_MAX else b""
        kinds = self._shapes.get(shape) if shape else None
        if kinds is None:
            kinds = _kinds(
                text.encode("utf-8", "replace") if raw is None else raw, text, structured
            )
            if shape and len(self._shapes) < _SHAPES:
                self._shapes[shape] = kinds
        if out.pending:
            out.neighbour(line_no, text)
        frames = ""
        ignored = False  # the exception line of a traceback Python says it ignored
        tracebacks = self._tracebacks
        # An excerpt that begins inside a traceback (its header cut off) opens one at its
        # first frame: the first line with text, nothing before it.
        headless = not self._text_seen and 'File "' in text
        self._text_seen = self._text_seen or bool(text.strip())
        if TRACEBACK_START in text or tracebacks.active or headless:
            if TRACEBACK_START in text:
                self._ignoring = IGNORED_MARK in self._prev
            unit = tracebacks.feed(
                line_no, text[parse_prefix(text).body_start :], headless=headless
            )
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
        else:
            progress.job_spoke = True  # a traceback is the job's own output
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
        evidence_seen = self._evidence.count
        if (
            len(prev) >= WRAP_MIN
            and text[:1].isalnum()
            and prev[-1].isalnum()
            and is_wrap(prev, text, widths)
        ):
            joined = prev + text
            hits = self._match(_view(joined))
            if hits:
                out.drop_line(line_no - 1)
                found = min(found, len(out.events))
                before = list(self._ring)[:-1]
                out.add(hits, line_no - 1, joined, year, before, frames)
        else:
            hits = ()
        if not hits:
            # Not a wrap that completes a match (lines of one format often share a width):
            # the line stands on its own.
            hits = (
                () if ignored else self._match(text, shape) if shape else self._match(_view(text))
            )
            if hits:
                out.add(hits, line_no, text, year, list(self._ring), frames)
            elif kinds & _EVIDENCE and not tracebacks.active and not ignored:
                start = parse_prefix(text).body_start
                self._evidence.feed(
                    line_no, text[start:], progress.reports, text[:start], self._results.rows
                )
        if kinds & _STRUCTURED or structured.live:
            findings = structured.feed(line_no, text, bool(kinds & _STRUCTURED))
            if findings:
                out.add_findings(findings, line_no, text, year, list(self._ring))
        if kinds & (_PROGRESS | _TIMELINE) and not tracebacks.active:
            if kinds & _PROGRESS:
                self._timeline.candidate(line_no, text)
            if kinds & _TIMELINE:
                self._timeline.observe(line_no, text)
        if kinds & _COLLECTIVE:
            self._collectives.observe(line_no, text)
        if kinds & _SCALER:
            self._scaler.feed(line_no, text, progress.reports)
        if kinds & _RESULT and not tracebacks.active:
            self._results.feed(text[parse_prefix(text).body_start :])
        if kinds & _STACK or self._stacks.active:
            self._stacks.feed(line_no, text[parse_prefix(text).body_start :])
        if len(out.events) != found or self._evidence.count != evidence_seen:
            progress.screen = True  # steps now count towards "training went on past it"
        self._ring.append((line_no, text[: self._window_chars]))
        self._prev = text
        return tuple(out.events[found:]) if len(out.events) != found else ()

    def feed_run(
        self, texts: Sequence[str], first_line_no: int, parsed: Sequence[Parsed]
    ) -> tuple[Event, ...]:
        """``feed`` of consecutive lines of one shape (``line_shape``: the same text but for
        digits, a ``ProgressRun``'s), numbered from ``first_line_no``, with each line's
        timeline point already read (``parsed``). To the same effect as feeding them one by
        one: lines that nothing but the progress count, the line widths, the timeline and
        the window of recent lines care about are taken together; a line that anything else
        may want (an open traceback or table, the year not known yet, a first step not seen
        yet, a shape the matcher or a tracker looks at) is fed on its own."""
        events: list[Event] = []
        plain = self._plain_shape(texts[0]) if texts else 0
        for i, text in enumerate(texts):
            if plain and self._takes_plain(plain, first_line_no + i):
                self._feed_plain(plain, texts[i:], first_line_no + i, parsed[i:])
                break
            events.extend(self.feed(text, first_line_no + i))
        return tuple(events)

    def _plain_shape(self, text: str) -> int:
        """For a line whose shape only the progress count, widths and timeline care about:
        1 + its ``_kinds`` bits, with ``_PLAIN_STEP`` when it is a step candidate; 0 for any
        other line. Every test here reads no digit, so it holds for the whole shape."""
        if len(text) > MAX_LINE or text[4:5] != "-" or not text[:4].isdigit():
            return 0  # only an ISO-date-led line is never the continuation of a wrapped one
        if "loss" not in text:
            return 0  # a step that reports its loss is never taken for a restart line
        shape = line_shape(text)
        known = self._plain_shapes.get(shape)
        if known is None:
            known = self._plain_shapes[shape] = self._plain_verdict(shape, text)
        return known

    def _plain_verdict(self, shape: bytes, text: str) -> int:
        if len(self._plain_shapes) >= _SHAPES:
            self._plain_shapes.clear()
        if not plain_words(shape):
            return 0
        kinds = self._shapes.get(shape)
        if kinds is None:
            kinds = _kinds(text.encode("utf-8", "replace"), text, self._structured)
            if len(self._shapes) < _SHAPES:
                self._shapes[shape] = kinds
        if kinds & ~_PROGRESS or not self.matcher.silent(shape):
            return 0
        step = any(t in text for t in _STEP_WORDS)
        return 1 + kinds + (_PLAIN_STEP if step else 0)

    def _takes_plain(self, plain: int, line_no: int) -> bool:
        """The scan's state lets a plain line pass without being looked at on its own."""
        progress = self._progress
        return not (
            self.out.pending
            or self._tracebacks.active
            or self._failure_lines > 0
            or self._structured.live
            or self._stacks.active
            or (self.year is None and line_no <= 500)
            or (plain & _PLAIN_STEP and progress.first is None)
            or (progress.init_line is not None and progress.after_init <= 3)
            or (progress.nccl_seen and progress.after_nccl <= 3)
        )

    def _feed_plain(
        self, plain: int, texts: Sequence[str], first: int, parsed: Sequence[Parsed]
    ) -> None:
        n = len(texts)
        self.line_no = first + n - 1
        self._text_seen = True
        progress = self._progress
        if plain & _PLAIN_STEP:
            progress.reports += n
            progress.last_candidates.extend(texts)  # a bounded deque: the last few stay
        widths = self._widths
        for width, lines in Counter(map(len, texts)).items():
            if width >= WRAP_MIN:
                widths[width] = widths.get(width, 0) + lines
        self.out.reports_now = progress.reports
        if (plain - 1) & _PROGRESS:
            self._timeline.candidates(first, texts, parsed)
        ring, cut = self._ring, self._window_chars
        keep = n if ring.maxlen is None else min(n, ring.maxlen)
        ring.extend(
            zip(
                range(first + n - keep, first + n),
                map(operator.itemgetter(slice(cut)), texts[n - keep :]),
                strict=True,
            )
        )
        self._prev = texts[-1]

    def _timeline_now(self) -> Timeline:
        timeline = self._timeline.timeline(self.line_no, self.path)
        run = self._scaler.run(self._progress.reports)
        if run is not None:
            timeline = replace(timeline, scaler_run=run)
        cut = self._tracebacks.open_unit()
        if cut is None or not self._ends_at(cut[1]):
            return timeline
        return replace(timeline, cut_traceback_line=cut[0], cut_traceback=cut[2])

    def _ends_at(self, line_no: int) -> bool:
        """Whether the file ends at ``line_no`` (only blank lines after it): a traceback that
        other output followed was closed by a line the tracker did not recognise."""
        return line_no >= self.line_no - CUT_TAIL and not self._trailing_text(line_no)

    def _trailing_text(self, line_no: int) -> bool:
        return any(n > line_no and text.strip() for n, text in self._ring)

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
            evidence=self._evidence.lines(total, self._results.rows),
            evidence_count=self._evidence.count,
            timeline=self._timeline_now(),
            collectives=self._collectives.trace(),
            attempt_line=self.attempt_line,
            attempt_started=self.attempt_started,
            kernel_log_of=(
                self.node_hint
                if self.kernel_lines and self.node_hint and is_kernel_log_name(self.path)
                else None
            ),
            stack_dumps=self._stacks.dumps(),
        )


CUT_TAIL = 3
"""At most this many (blank) lines after a traceback's last line for it to count as cut."""


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
        feed(raw.decode("utf-8", "replace").rstrip("\r\n"), raw=raw)
    return scanner.result()
