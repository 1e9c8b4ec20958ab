"""Events of one file: catalogue hits and structured findings, with their surroundings.

Moved out of ``scan.py`` (which streams the lines): the collector turns a line's hits into
events, decides which lines are kernel evidence, and keeps a bounded window of neighbour lines
around the first events (see ``ScanLimits``).

Which lines are kernel evidence: every line of a file named like a kernel log
(``kern.log``, ``dmesg``, ``syslog``, ``messages``, ``journal``), and any line whose prefix is a
syslog ``kernel:`` tag or a dmesg stamp, or whose message starts with ``NVRM:``. For the live
service, only the node's kernel-log source counts; offline, the files given are all we have.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import Event, EvidenceSource
from trainmedic.core.signatures.matcher import Hit, Matcher

_KERNEL_FILE = re.compile(
    r"(?i)(?:^|[._-])(?:kern|kernel|dmesg|syslog|messages|journal)(?:[._-]|$)"
)
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
_RANK_FILE = re.compile(r"(?i)(?:rank|default|worker|proc)[._-]?(\d{1,5})(?:\D|$)")
_NODE_FIELD = re.compile(r"node=([\w.-]+)\s")

MAX_EVENT_TEXT = 4096
"""Characters of a matched line kept in its event (5000 events of 64 KiB would be 320 MB)."""


@dataclass(frozen=True, slots=True)
class ScanLimits:
    max_line_bytes: int = 64 * 1024
    max_events: int = 5000
    max_windows: int = 200
    window_before: int = 8
    window_after: int = 6
    window_chars: int = 400


def file_rank(path: str) -> int | None:
    m = _RANK_FILE.search(path.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


class _Pending:
    __slots__ = ("after", "before", "event", "frames", "line")

    def __init__(self, event: Event, line: int, before: list[tuple[int, str]], frames: str):
        self.event, self.line, self.before, self.frames = event, line, before, frames
        self.after: list[tuple[int, str]] = []


class Collector:
    """Builds events from hits and keeps their windows (bounded by ``ScanLimits``)."""

    def __init__(self, path: str, node_hint: str | None, limits: ScanLimits, m: Matcher):
        self.path, self.node_hint, self.limits, self.to_event = path, node_hint, limits, m.to_event
        self.kernel_file = bool(_KERNEL_FILE.search(path.rsplit("/", 1)[-1]))
        self.kernel_prefixes = True  # a kernel-style prefix or message makes kernel evidence
        self.file_rank = file_rank(path)
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
                or body.lstrip().startswith(_KERNEL_BODY)  # dmesg continuation lines are indented
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
            self._keep(event, line_no, before, frames)

    def add_findings(
        self,
        findings: list[Finding],
        line_no: int,
        text: str,
        year: int,
        before: list[tuple[int, str]],
    ) -> None:
        """Events for what a structured parser found on ``line_no`` (see ``structured.py``)."""
        prefix = parse_prefix(text, year)
        if prefix.node is None and self.node_hint is not None:
            prefix = replace(prefix, node=self.node_hint)
        for found in findings:
            if len(self.events) >= self.limits.max_events:
                return
            event = Event(
                signature=found.signature,
                category=found.category,
                kind=found.kind,
                role=found.role,
                line=line_no,
                text=found.text[:MAX_EVENT_TEXT],
                source=self.path,
                evidence=found.evidence,
                timestamp=prefix.timestamp,
                rank=prefix.rank if prefix.rank is not None else self.file_rank,
                node=found.node or prefix.node,
                gpu=found.gpu,
                action_hint=found.action_hint,
                strong=found.strong,
                likely=found.likely,
            )
            self._keep(event, line_no, before, "")

    def _keep(self, event: Event, line_no: int, before: list[tuple[int, str]], frames: str) -> None:
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
