"""Thread stack dumps: what a stuck process was doing when someone looked.

Python's ``faulthandler`` (``dump_traceback``, ``dump_traceback_later``, a signal registered
with ``faulthandler.register``) and ``py-spy dump`` print the stack of every thread::

    Thread 0x00007f57caf71740 (most recent call first):
      File ".../torch/cuda/streams.py", line 95 in synchronize

    Thread 4939 (idle): "MainThread"
        backward (torch/autograd/__init__.py:199)

Nobody dumps the stacks of a process that is making progress: a dump is how a hang gets
reported, and the innermost frames of the main thread say where the process waited. The one
exception is faulthandler's report of a fatal signal ("Fatal Python error: Segmentation
fault" just above the dump): a crash, with its stack, not a hang.

Bounded: the first ``MAX_DUMPS`` dumps are kept, each with at most ``MAX_FRAMES`` innermost
frames of at most ``MAX_THREADS`` threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_DUMPS = 4
MAX_THREADS = 16
MAX_FRAMES = 12
FATAL_LOOKBACK = 4
"""A dump that starts within this many lines of "Fatal Python error" reports a crash."""

_HEADER = re.compile(
    r"^\s*(?:Current thread|Thread) (?:0x[0-9a-fA-F]+|\d+) \(most recent call first\):"
    r"|^\s*Thread (?:0x[0-9a-fA-F]+|\d+) \((?:idle|active)[^)]*\)(?::\s*\"([^\"]*)\")?"
    r"|^\s*Stack \(most recent call first\):"
)
_FAULTHANDLER_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+ in (\S+)')
_PYSPY_FRAME = re.compile(r"^\s*(\S+) \(([^():]+)(?::\d+)?\)\s*$")
_PYSPY_ANON = re.compile(r"^\s*(\S+) \(\)\s*$")
# "Process 4939: python train.py" / "Python v3.10.12 (/usr/bin/python3)": py-spy's preamble
_PREAMBLE = re.compile(r"^\s*(?:Process \d+: |Python v\d)")
_FATAL = "Fatal Python error"
TRIGGERS = ("most recent call first", "(idle", "(active", _FATAL)


@dataclass(frozen=True, slots=True)
class ThreadStack:
    name: str  # py-spy's thread name ("MainThread"), or "" for faulthandler
    frames: tuple[str, ...]  # innermost first: "synchronize (torch/cuda/streams.py)"

    @property
    def is_main(self) -> bool:
        return self.name == "MainThread" or any(f.startswith("<module>") for f in self.frames)


@dataclass(frozen=True, slots=True)
class StackDump:
    line: int
    threads: tuple[ThreadStack, ...]
    after_fatal: bool = False  # faulthandler's report of a fatal signal: a crash

    def main_thread(self) -> ThreadStack | None:
        """The thread running the program's own code (py-spy's MainThread, the one whose
        outermost frame is ``<module>``), else the first one listed."""
        main = [t for t in self.threads if t.is_main and t.frames]
        if main:
            return main[0]
        return next((t for t in self.threads if t.frames), None)


def _short(path: str) -> str:
    """``/opt/conda/lib/python3.10/site-packages/torch/cuda/streams.py`` -> ``torch/cuda/
    streams.py``: the package-relative part, which is what says whose code it is."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    parts = path.strip("/").split("/")
    return "/".join(parts[-3:])


class StackDumpTracker:
    """Feed lines that hold a trigger (``wants``) and every line while ``active``."""

    __slots__ = ("_dumps", "_fatal_line", "_frames", "_name", "_thread_open", "_threads", "active")

    def __init__(self) -> None:
        self._dumps: list[StackDump] = []
        self._threads: list[ThreadStack] = []
        self._frames: list[str] = []
        self._name = ""
        self._thread_open = False
        self._fatal_line: int | None = None
        self.active = False

    @staticmethod
    def wants(text: str) -> bool:
        """Depends on no digit: the scan memoises it per line shape."""
        return any(t in text for t in TRIGGERS)

    def feed(self, line_no: int, text: str) -> None:
        if _FATAL in text:
            self._fatal_line = line_no
            return
        header = _HEADER.match(text)
        if header is not None:
            if not self.active:
                self._start(line_no)
            self._close_thread()
            self._thread_open, self._name = True, header.group(1) or ""
            return
        if not self.active:
            return
        frame = _FAULTHANDLER_FRAME.match(text)
        if frame is not None:
            self._frame(f"{frame.group(2)} ({_short(frame.group(1))})")
            return
        frame = _PYSPY_FRAME.match(text) or _PYSPY_ANON.match(text)
        if frame is not None:
            where = frame.group(2) if frame.lastindex and frame.lastindex >= 2 else ""
            self._frame(f"{frame.group(1)} ({_short(where)})")
            return
        if not text.strip() or _PREAMBLE.match(text):
            self._close_thread()  # a blank line ends a thread; another header may follow
            return
        self._finish()

    def _start(self, line_no: int) -> None:
        self.active = True
        fatal = self._fatal_line is not None and line_no - self._fatal_line <= FATAL_LOOKBACK
        self._dumps.append(StackDump(line_no, (), fatal))

    def _frame(self, frame: str) -> None:
        if self._thread_open and len(self._frames) < MAX_FRAMES:
            self._frames.append(frame)

    def _close_thread(self) -> None:
        if self._thread_open and len(self._threads) < MAX_THREADS:
            self._threads.append(ThreadStack(self._name, tuple(self._frames)))
        self._thread_open, self._frames, self._name = False, [], ""

    def _finish(self) -> None:
        self._close_thread()
        if self._dumps:
            last = self._dumps[-1]
            self._dumps[-1] = StackDump(last.line, tuple(self._threads), last.after_fatal)
            if len(self._dumps) > MAX_DUMPS:
                self._dumps.pop()
        self._threads = []
        self.active = False

    def dumps(self) -> tuple[StackDump, ...]:
        if self.active:
            self._finish()
        return tuple(d for d in self._dumps if d.threads)
