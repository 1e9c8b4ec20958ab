"""What a dynamic loss scaler printed: overflows (skipped steps), scales that grew back, and
Megatron's per-interval count of skipped iterations, read as one *run* at a time.

A run is a sequence of skipped steps with no successful scale increase between them: each
report's scale is at most the one before (DeepSpeed's "Attempted loss scale" is the scale the
previous skip left; Apex's and fairseq's "reducing/setting loss scale to X" halves it again),
or, for reports that print no scale, the steps are adjacent. A scale that grew (a higher
attempted scale, a "reducing to" value not below the last, an "Increasing dynamic loss scale"
line, a Megatron interval with few skips) ends the run. Only the last run of the attempt is
kept (``ScalerRun``), with how many progress reports came after its last skip: whether it
diverged is ``attribute/overflow.py``'s to judge. The wordings are data
(``loss_scale.toml``); state is constant-size, whatever the log's length.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

from trainmedic.core.errors import ConfigError
from trainmedic.core.tomlschema import build, parse_toml

EFFECTS = frozenset({"skip", "grow", "interval"})
DUPLICATE_LINES = 3
"""A report this close to the previous one that agrees with it is the same skip printed again
(DeepSpeed's fused optimizer prints "Grad overflow on iteration", "Reducing dynamic loss scale"
and "Overflow detected" for one step)."""
ADJACENT_ITERATIONS = 2
"""Skips without a scale are consecutive when their iterations are at most this far apart."""
STEPS_BETWEEN = 20
"""More progress reports than this between two skips: training went on between them."""

TRIGGERS = ("verflow", "OVERFLOW", "skipped iterations", "oss scale")


@dataclass(frozen=True, slots=True)
class _ReportEntry:
    id: str
    pattern: str
    effect: str
    examples: tuple[str, ...]
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _ReportFile:
    report: tuple[_ReportEntry, ...]


@dataclass(frozen=True, slots=True)
class ReportForm:
    id: str
    regex: re.Pattern[str]
    effect: str
    examples: tuple[str, ...]
    values: tuple[str, ...]


def parse_forms(text: str, origin: str = "loss_scale.toml") -> tuple[ReportForm, ...]:
    forms = []
    for entry in build(_ReportFile, parse_toml(text, origin), origin).report:
        if entry.effect not in EFFECTS:
            raise ConfigError(f"{origin}: {entry.id}: effect must be one of {sorted(EFFECTS)}")
        if len(entry.values) != len(entry.examples):
            raise ConfigError(f"{origin}: {entry.id}: one value line per example")
        try:
            regex = re.compile(entry.pattern)
        except re.error as exc:
            raise ConfigError(f"{origin}: {entry.id}: bad pattern: {exc}") from exc
        forms.append(ReportForm(entry.id, regex, entry.effect, entry.examples, entry.values))
    return tuple(forms)


@functools.cache
def default_forms() -> tuple[ReportForm, ...]:
    text = resources.files("trainmedic.core.logparse").joinpath("loss_scale.toml")
    return parse_forms(text.read_text("utf-8"))


@dataclass(frozen=True, slots=True)
class ScaleReport:
    form: str
    effect: str
    scale: float | None = None
    attempted: float | None = None
    iteration: int | None = None
    skipped: int | None = None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def read_report(text: str) -> ScaleReport | None:
    """The first report form that matches ``text``, with its values."""
    for form in default_forms():
        m = form.regex.search(text)
        if m is None:
            continue
        groups = m.groupdict()
        iteration, skipped = groups.get("iteration"), groups.get("skipped")
        return ScaleReport(
            form.id,
            form.effect,
            scale=_number(groups.get("scale")),
            attempted=_number(groups.get("attempted")),
            iteration=int(iteration) if iteration is not None else None,
            skipped=int(skipped) if skipped is not None else None,
        )
    return None


@dataclass(frozen=True, slots=True)
class ScalerRun:
    """The last run of skipped steps in a file (see the module's docstring)."""

    form: str  # the report form of its first skip (names the scaler)
    first_line: int
    last_line: int
    skips: int
    start_scale: float | None  # the scale its first skip attempted
    last_scale: float | None  # the scale it left
    falling: bool  # every skip kept or lowered the scale
    first_of_file: bool  # no scaler report came before it (a start calibrating its scale)
    reports_after: int  # progress reports printed after its last skip
    reports_before: int = 0  # progress reports printed before its first skip (training had run)


class LossScaleTracker:
    """Fed the lines ``wants`` accepted, with the progress reports counted so far."""

    __slots__ = (
        "_falling",
        "_first_of_file",
        "_form",
        "_iteration",
        "_last_line",
        "_prev",
        "_reports_at",
        "_reports_before",
        "_run_first",
        "_scale",
        "_seen",
        "_skips",
        "_start",
    )

    def __init__(self) -> None:
        self._seen = False  # any scaler report yet
        self._scale: float | None = None  # the scale the last report left
        self._iteration: int | None = None
        self._prev: ScaleReport | None = None
        self._last_line = 0
        self._reports_at = 0
        self._reports_before = 0
        self._skips = 0  # of the current run (0: none)
        self._form = ""
        self._run_first = 0
        self._start: float | None = None
        self._falling = True
        self._first_of_file = False

    @staticmethod
    def wants(text: str) -> bool:
        return any(t in text for t in TRIGGERS)

    def feed(self, line_no: int, text: str, reports: int) -> None:
        report = read_report(text)
        if report is None:
            return
        if report.effect == "skip" and self._duplicate(report, line_no):
            self._merge(report)
            return
        if report.effect == "grow":
            self._skips = 0
        elif report.effect == "interval":
            self._interval(report, line_no, reports)
        else:
            self._skip(report, line_no, reports)
        self._prev = report
        self._seen = True
        if report.scale is not None:
            self._scale = report.scale
        elif report.attempted is not None:
            self._scale = report.attempted
        if report.iteration is not None:
            self._iteration = report.iteration
        self._last_line = line_no

    def _duplicate(self, report: ScaleReport, line_no: int) -> bool:
        prev = self._prev
        if prev is None or prev.effect != "skip" or line_no - self._last_line > DUPLICATE_LINES:
            return False
        return (report.scale is None or report.scale == prev.scale or prev.scale is None) and (
            report.attempted is None or prev.attempted is None or report.attempted == prev.attempted
        )

    def _merge(self, report: ScaleReport) -> None:
        if report.scale is not None:
            self._falling = self._falling and (self._scale is None or report.scale <= self._scale)
            self._scale = report.scale
        if self._start is None:
            self._start = report.attempted
        if self._prev is not None and self._prev.scale is None:
            self._prev = report

    def _continues(self, report: ScaleReport, reports: int) -> bool:
        if not self._skips or reports - self._reports_at > STEPS_BETWEEN:
            return False
        last = self._scale
        if report.attempted is not None and last is not None:
            return report.attempted <= last * 1.001
        if report.scale is not None and last is not None:
            return report.scale < last  # the same "reducing to" value again: it grew between
        if report.iteration is not None and self._iteration is not None:
            return 0 <= report.iteration - self._iteration <= ADJACENT_ITERATIONS
        return reports - self._reports_at <= 3

    def _start_run(self, report: ScaleReport, line_no: int, reports: int) -> None:
        self._form = report.form
        self._reports_before = reports
        self._run_first = line_no
        self._skips = 0
        self._start = report.attempted if report.attempted is not None else self._scale
        self._falling = True
        self._first_of_file = not self._seen

    def _skip(self, report: ScaleReport, line_no: int, reports: int) -> None:
        if not self._continues(report, reports):
            self._start_run(report, line_no, reports)
        new = report.scale if report.scale is not None else report.attempted
        if new is not None and self._scale is not None and self._skips:
            self._falling = self._falling and new <= self._scale
        self._skips += 1
        self._reports_at = reports

    def _interval(self, report: ScaleReport, line_no: int, reports: int) -> None:
        skipped = report.skipped or 0
        span = (
            report.iteration - self._iteration
            if report.iteration is not None and self._iteration is not None
            else report.iteration
        )
        if span is None or span <= 0 or 2 * skipped <= span:
            self._skips = 0  # most of the interval trained: no run
            return
        grew = self._scale is not None and report.scale is not None and report.scale > self._scale
        if not self._skips or grew:
            self._start_run(report, line_no, reports)
            self._start = self._scale if self._scale is not None else report.scale
        elif report.scale is not None and self._scale is not None:
            self._falling = self._falling and report.scale <= self._scale
        self._skips += skipped
        self._reports_at = reports

    def run(self, reports: int) -> ScalerRun | None:
        """The last run, or None when the last report was no skip (``reports``: the
        progress reports counted at the end)."""
        if not self._skips:
            return None
        return ScalerRun(
            form=self._form,
            first_line=self._run_first,
            last_line=self._last_line,
            skips=self._skips,
            start_scale=self._start,
            last_scale=self._scale,
            falling=self._falling,
            first_of_file=self._first_of_file,
            reports_after=max(0, reports - self._reports_at),
            reports_before=self._reports_before,
        )
