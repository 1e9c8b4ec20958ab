"""Python tracebacks as one unit: the frames and the exception line that ends them.

The exception line (``RuntimeError: File ckpt.pt cannot be opened.``) is what a signature
matches and where the root cause sits; the frames say what the program was doing (a
``torch.save`` frame makes "cannot be opened" a checkpoint write). Real logs interleave lines
of several ranks and wrap long lines, so the tracker is tolerant: foreign lines inside a
traceback are skipped (a bounded number), and a chained traceback ("During handling of the
above exception ...") starts a new unit.

``TracebackTracker.feed`` takes the message after the line prefix (see ``prefix.py``) and is
O(1) per line outside tracebacks, so the streaming analyser can feed every line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

START = "Traceback (most recent call last)"
_EXCEPTION = re.compile(
    r"([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault|Failure))(?::\s?(.*))?$"
)
_FRAME = re.compile(r'\s*File "?([^",]+)"?, line (\d+)(?:, in (.+))?')
_MAX_FRAMES = 200
_MAX_FOREIGN = 30


@dataclass(frozen=True, slots=True)
class Traceback:
    start_line: int
    exception_line: int
    exception_type: str  # "RuntimeError", "torch.cuda.OutOfMemoryError"
    message: str
    frames: tuple[str, ...]  # 'path:line in func' then the code line, innermost last

    def frames_text(self) -> str:
        return "\n".join(self.frames)


class TracebackTracker:
    """Feed lines in order; ``feed`` returns a unit when its exception line arrives."""

    __slots__ = ("_foreign", "_frames", "_last", "_start", "active")

    def __init__(self) -> None:
        self._start: int | None = None
        self._last = 0  # the last line that was part of the traceback (header, frame, code)
        self._frames: list[str] = []
        self._foreign = 0
        self.active = False  # inside a traceback (a plain attribute: read on every line)

    def feed(self, line_no: int, body: str, headless: bool = False) -> Traceback | None:
        """``headless``: the line may open a traceback whose header was cut off, when it is a
        frame (the caller offers only the first line of an excerpt)."""
        if START in body:
            self._start, self._frames, self._foreign = line_no, [], 0
            self._last = line_no
            self.active = True
            return None
        if headless and self._start is None and _FRAME.match(body):
            self._start, self._frames, self._foreign = line_no, [], 0
            self.active = True
        if self._start is None:
            return None
        stripped = body.strip()
        if not stripped:
            return None
        frame = _FRAME.match(body)
        if frame:
            func = frame.group(3) or "?"
            self._add(f"{frame.group(1)}:{frame.group(2)} in {func.strip()}")
            self._last = line_no
            return None
        if body[:1] in (" ", "\t"):
            self._add(stripped)  # the source line of the frame above
            self._last = line_no
            return None
        exc = _EXCEPTION.match(stripped)
        if exc:
            unit = Traceback(
                start_line=self._start,
                exception_line=line_no,
                exception_type=exc.group(1),
                message=(exc.group(2) or "").strip(),
                frames=tuple(self._frames),
            )
            self._start = None
            self.active = False
            return unit
        self._foreign += 1
        if self._foreign > _MAX_FOREIGN:
            self._start = None
            self.active = False
        return None

    def open_unit(self) -> tuple[int, int, tuple[str, ...]] | None:
        """The traceback being read (its first line, its last line so far and its frames), if
        one is open: at the end of a file, a traceback its excerpt cut before the exception
        line when nothing but blanks follows its last line."""
        if self._start is None:
            return None
        return self._start, self._last, tuple(self._frames)

    def _add(self, text: str) -> None:
        if len(self._frames) < _MAX_FRAMES:
            self._frames.append(text[:300])


def group_tracebacks(bodies: Iterable[str], first_line: int = 1) -> list[Traceback]:
    """All complete tracebacks in ``bodies`` (messages without prefixes), in order."""
    tracker = TracebackTracker()
    units = []
    for offset, body in enumerate(bodies):
        unit = tracker.feed(first_line + offset, body)
        if unit is not None:
            units.append(unit)
    return units
