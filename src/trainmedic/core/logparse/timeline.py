"""The time structure of a file: progress points, loss values, "still running" reports and the
marks of a training loop that ended.

``ProgressTracker`` (tracker.py) summarises how far a job got; attribution by time structure
needs more: *when* progress stopped against its cadence, whether a scheduler or watchdog kept
reporting the job as running after that, how the loss moved (a spike, a collapse to 0, a
non-finite value) and whether the iteration counter went back (a restart from a checkpoint).

Bounded: at most ``MAX_POINTS`` points are kept (when full, every other one is dropped and
only every second candidate is parsed from then on), plus the last ``LAST_POINTS`` candidates
parsed at the end, so a billion-line log costs what a million-line one does.

Lazy: a candidate chosen to be kept is parsed only when the timeline is asked for, or once
the kept points and the candidates waiting to be parsed could fill ``MAX_POINTS`` (only then
can a parse change which later candidates are kept): the same points as parsing each at
once, at no cost for a file whose timeline nobody reads (a live job's log that ends without
a failure), and no more memory (a waiting line takes a point's place).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from trainmedic.core.logparse.loss_scale import ScalerRun
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.progress import parse_progress

Parsed = tuple[int, float, float | None, float | None]
"""A progress line's (iteration, loss, printed stamp, step time): its ``Point`` but the line."""

MAX_POINTS = 256
LAST_POINTS = 64
MAX_RUNNING = 256

_LOSS = re.compile(
    r"""(?<![\w'"])['"]?(?:lm )?loss['"]?\s*[:=]\s*"""
    r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|inf|-inf)"
)
# A scheduler or a monitor saying the job is (still) running: chronicle pulse lines, squeue /
# sacct / scontrol rows in state R / RUNNING.
_RUNNING = re.compile(
    r"\bis (?:still )?running for\b|\bJobState=RUNNING\b|\bstill running\b"
    r"|\s(?:RUNNING|R)\s+\d+(?:-\d+)?:\d+(?::\d+)?\s"
)
# The training loop ended by itself (before whatever comes next).
_FINISHED = re.compile(
    r"`Trainer\.fit` stopped: `max_(?:epochs|steps)|[Ff]inished training\b|\{'train_runtime'"
    r"|[Tt]raining (?:completed|finished|done|complete)\b|End of training\b|[Tt]raining is done\b"
)

# The ranks begin forming the process group (a framework's "initializing" line, torchrun's
# rendezvous) / report that it formed. A log that stops after the first and never shows the
# second is a rendezvous that never completed.
_INIT_START = re.compile(
    r"Initializing TorchBackend|[Ii]nitializing (?:ddp|distributed|torch distributed"
    r"|process group)\b|Rendezvous'ing worker group|Waiting in store based barrier"
    r"|Setting up process group for"
)
_INIT_DONE = re.compile(
    r"processes registered|Rendezvous complete|[Cc]ompleted store-based barrier"
    r"|Distributed environment:|initialized tensor model parallel|initialized data parallel"
    r"|Distributed environment is initialized|[Ss]tarted distributed worker"
)

# A submission that waits for its allocation (srun/salloc, PBS's interactive qsub, LSF's bsub -I)
# and the line saying it was granted. A log whose last lines are the wait, never the grant, is
# a job the scheduler never started.
_ALLOC_WAIT = re.compile(
    r"\b(?:srun|salloc): (?:Pending job allocation|job \d+ queued and waiting for resources)"
    r"|qsub: waiting for job \S+ to start|<<Waiting for dispatch"
)
_ALLOC_GRANT = re.compile(
    r"\b(?:srun|salloc): (?:Granted job allocation|job \d+ has been allocated resources"
    r"|job \d+ running on|Nodes? \S+ (?:are|is) ready)|qsub: job \S+ ready|<<Starting on "
)
# torch's warning, at a process group's first collective (a barrier, mostly), that it guessed
# the rank's GPU: ProcessGroupNCCL creates its communicator lazily right then, so the line marks
# the start of NCCL's setup (every healthy start prints it too, and goes on).
_DEVICE_GUESS = re.compile(
    r"using (?:best-guess )?GPU \d+ (?:to perform barrier as devices used by this process are"
    r"|as device used by this process is) currently unknown"
    r"|barrier\(\): using the device under current context"
)
_DEVICE_GUESS_HINTS = ("currently unknown", "under current context")

_ALLOC_HINTS = ("job allocation", "queued and waiting", "has been allocated", "running on",
                "ready", "waiting for job", "<<")  # fmt: skip

_INIT_HINTS = ("nitializ", "endezvous", "barrier", "registered", "nvironment", "process group",
               "worker")  # fmt: skip


_TRIGGERS = (
    "nitializing",
    "Rendezvous",
    "store based barrier",
    "store-based barrier",
    "processes registered",
    "Distributed environment",
    "nitialized ",
    "process group for",
    "istributed worker",
    "environment is",
    "running for",
    "RUNNING",
    " R ",
    "still running",
    "raining ",
    "fit` stopped",
    "train_runtime",
    "Connected all",
    "# Using devices",
    " float ",
    " half ",
    " bfloat16 ",
    "NCCL",
    "Avg bus bandwidth",
    "out-of-place",
    "redop",
    *_ALLOC_HINTS,
    *_DEVICE_GUESS_HINTS,
)
# NCCL's opening lines: version, environment settings, the interfaces and plugins it picks, an
# optional library it falls back from. Every healthy start prints them before it connects a
# single rank, so a log holding only these is an excerpt of a start, not a wait inside setup.
_NCCL_OPENING = re.compile(
    r"[NR]CCL version|\bset (?:by environment )?to\b|: Using \[|NET/Plugin|No plugin found"
    r"|[Ff]ailed to (?:open|dlopen|load) \S*lib|cudaDriverVersion|Bootstrap\s*:|[Pp]lugin\b"
    # the transport it chose ("Using network IB"): said once the interfaces were listed, before
    # it connects to a single peer
    r"|\bUsing network \w+"
    # a rank entering ncclCommInitRank ("Init START", its config's "Comm config ...") has begun,
    # not reached a peer: every rank of a healthy start prints it before bootstrap answers
    r"|\bInit START\b|\bComm config\b"
    # the same opening in NCCL 2.3-2.6's words: the interfaces it found and picked, the IB
    # devices it lists, the transport ("Using internal Network IB") and the rank entering init
    # ("rank 0 nranks 3", the later "Init START")
    r"|\bNET(?:/\w+)?\s*: (?:Using interface|\d+ interfaces? found|\[\d+\])"
    r"|\bUsing internal Network \w+|\brank \d+ nranks \d+\s*$"
    # the CPU affinity NCCL sets for a rank's GPU ("Setting affinity for GPU 3 to 0fffff"): each
    # rank prints it once its topology is read, before its first channel connects a peer
    r"|\bSetting affinity for GPU \d+ to\b"
)
# The communicator was formed and used: torn down cleanly, or a benchmark summed up its run.
_NCCL_USED = re.compile(r"Destroy COMPLETE|Avg bus bandwidth|Out of bounds values")
# nccl-tests / rccl-tests print their result table's header once the communicators are
# initialised (after the device table and NCCL's own init), before the first size is run.
_BENCH_HEADER = re.compile(r"#\s*size\s+count\s+type\s+redop\b|#\s+out-of-place\s+in-place\b")
# an nccl-tests / rccl-tests result row: size, count, type, redop, ...
_BENCH_ROW = re.compile(
    r"^\s*(\d+\s+\d+\s+(?:float|half|bfloat16|double|u?int\d*)\s+(?:sum|prod|min|max|avg|none)"
    r"\s+\S+)\s"
)


# A bare series: a step number and one value per line, nothing else ("76930 2.6496"), as a
# script printing its own loss writes it. The value is *some* metric, so such points only say
# when it stopped being a number (see attribute/timeline.py), never that it jumped. The gate
# is the scan's (per line shape: no digit is required, so a shape's lines all agree).
_BARE_GATE = re.compile(
    r"^\s*\d*\s+[-+]?\d*\.\d*(?:[eE][-+]?\d*)?\s*$|^\s*\d*\s+[-+]?(?:nan|NaN|NAN|inf|Inf)\s*$"
)
_BARE = re.compile(
    r"^\s*(\d{1,12})\s+([-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|NAN|[-+]?inf|[-+]?Inf)\s*$"
)


@dataclass(frozen=True, slots=True)
class Point:
    line: int
    iteration: int | None
    loss: float | None
    timestamp: float | None
    step_time: float | None = None
    bare: bool = False  # from a bare "step value" line: the value is some metric


@dataclass(frozen=True, slots=True)
class Timeline:
    points: tuple[Point, ...] = ()
    running: tuple[tuple[int, float | None], ...] = ()  # (line, timestamp) of running reports
    finished_line: int | None = None  # the last "training ended" mark
    lines: int = 0
    source: str = ""
    nccl_connected: bool = False  # NCCL said it connected all rings/trees: setup finished
    bench_started: bool = False  # nccl-tests / rccl-tests printed its device table
    bench_rows: int = 0  # and this many result rows
    # result rows that repeat the row on the line before (same size, type, op and root): copies
    # of the benchmark running side by side (``attribute/bench_copies.py``)
    bench_repeats: int = 0
    nccl_past_opening: bool = False  # an NCCL line beyond its opening ones (see _NCCL_OPENING)
    init_started_line: int | None = None  # the last "forming the process group" line
    init_done_line: int | None = None  # the last "the process group formed" line
    alloc_wait_line: int | None = None  # the last "waiting for the allocation" line
    alloc_granted_line: int | None = None  # the last "allocation granted" line
    device_guess_line: int | None = None  # the last "GPU ... currently unknown" (first collective)
    # A traceback the file ends inside, before its exception line (an excerpt cut there):
    # its first line and its frames, innermost last. Set by the scan, not the tracker.
    cut_traceback_line: int | None = None
    cut_traceback: tuple[str, ...] = ()
    # The last run of skipped steps a dynamic loss scaler reported (``loss_scale.py``), when
    # the last scaler report was a skip. Set by the scan, not the tracker.
    scaler_run: ScalerRun | None = None


def _loss(text: str) -> float | None:
    m = _LOSS.search(text)
    if m is None:
        return None
    try:
        return float(m.group(1))
    except ValueError:
        return None


def _point(line_no: int, text: str) -> Point | None:
    prefix = parse_prefix(text)
    body = text[prefix.body_start :]
    parsed = parse_progress(body)
    # A step that printed its loss needs no second look for one.
    loss = parsed.loss if parsed is not None and parsed.loss is not None else _loss(body)
    if parsed is None and loss is None:
        bare = _BARE.match(body)
        if bare is None:
            return None
        return Point(line_no, int(bare.group(1)), float(bare.group(2)), prefix.timestamp, bare=True)
    return Point(
        line=line_no,
        iteration=parsed.iteration if parsed else None,
        loss=loss,
        timestamp=prefix.timestamp,
        step_time=parsed.step_time if parsed else None,
    )


class TimelineTracker:
    __slots__ = (
        "_alloc_granted",
        "_alloc_wait",
        "_bench",
        "_bench_repeats",
        "_bench_rows",
        "_connected",
        "_device_guess",
        "_finished",
        "_init_done",
        "_init_started",
        "_last",
        "_last_row",
        "_past_opening",
        "_pending",
        "_points",
        "_running",
        "_seen",
        "_stride",
    )

    def __init__(self) -> None:
        # Kept points; a line read already is kept as (line, *Parsed) and made a Point only
        # when the timeline is asked for (most never are).
        self._points: list[Point | tuple[int, int, float, float | None, float | None]] = []
        # Kept candidates not parsed yet, in order; with their values when the caller read
        # them already (a plain progress line: ``Parsed``), else None.
        self._pending: list[tuple[int, str, Parsed | None]] = []
        self._last: deque[tuple[int, str, Parsed | None]] = deque(maxlen=LAST_POINTS)
        self._running: deque[tuple[int, float | None]] = deque(maxlen=MAX_RUNNING)
        self._finished: int | None = None
        self._connected = False
        self._past_opening = False
        self._bench = False
        self._bench_rows = 0
        self._bench_repeats = 0
        self._last_row: tuple[int, str] = (-2, "")
        self._init_started: int | None = None
        self._init_done: int | None = None
        self._alloc_wait: int | None = None
        self._alloc_granted: int | None = None
        self._device_guess: int | None = None
        self._stride = 1
        self._seen = 0

    @staticmethod
    def is_candidate(text: str) -> bool:
        """A possible progress or loss line (for ``candidate``)."""
        return (
            "loss" in text
            or "iter" in text
            or "step" in text
            or "%|" in text
            or _BARE_GATE.match(text) is not None
        )

    @staticmethod
    def wants(text: str) -> bool:
        """A possible running report or end-of-training mark (for ``observe``). Neither test
        depends on a digit: the scan memoises both per line shape."""
        return any(t in text for t in _TRIGGERS)

    def observe(self, line_no: int, text: str) -> None:
        """A line ``wants`` accepted (the scan asks it first)."""
        if _RUNNING.search(text):
            self._running.append((line_no, parse_prefix(text).timestamp))
        if _FINISHED.search(text):
            self._finished = line_no
        if "Connected all rings" in text or "Connected all trees" in text:
            self._connected = True
        if _NCCL_USED.search(text):
            self._connected = True
        if "NCCL" in text and not self._past_opening:
            self._past_opening = not _NCCL_OPENING.search(text)
        if "# Using devices" in text:
            self._bench = True
        if self._bench and _BENCH_HEADER.search(text):
            self._connected = True  # its communicators were set up
        row = _BENCH_ROW.match(text)
        if row is not None:
            # a result row: the collective ran, so the communicator had been set up
            self._connected = True
            if self._bench:
                self._bench_rows += 1
            # One run reports each (size, type, op, root) once; the same row again on the very
            # next line is another copy of the benchmark writing to the same stream.
            key = " ".join(row.group(1).split())
            if self._last_row == (line_no - 1, key):
                self._bench_repeats += 1
            self._last_row = (line_no, key)
        if any(hint in text for hint in _INIT_HINTS):  # most observed lines are NCCL's
            if _INIT_START.search(text):
                self._init_started = line_no
            if _INIT_DONE.search(text):
                self._init_done = line_no
        if any(hint in text for hint in _ALLOC_HINTS):
            if _ALLOC_WAIT.search(text):
                self._alloc_wait = line_no
            if _ALLOC_GRANT.search(text):
                self._alloc_granted = line_no
        if any(hint in text for hint in _DEVICE_GUESS_HINTS) and _DEVICE_GUESS.search(text):
            self._device_guess = line_no

    def candidate(self, line_no: int, text: str, parsed: Parsed | None = None) -> None:
        """``parsed``: the line's point as ``_point`` would read it, when known already."""
        self._seen += 1
        if len(self._last) == LAST_POINTS and (self._seen - LAST_POINTS) % self._stride == 0:
            self._pending.append(self._last[0])
            if len(self._points) + len(self._pending) >= MAX_POINTS:
                self._parse_pending()  # the parses may halve the points and the stride
        self._last.append((line_no, text, parsed))

    def candidates(
        self, first_line: int, texts: Sequence[str], parsed: Sequence[Parsed | None]
    ) -> None:
        """``candidate`` of consecutive lines (numbered from ``first_line``), at the cost of
        the few it keeps: once the last ``LAST_POINTS`` are held, candidate ``j`` of them
        pushes out the ``j``-th of (those held, then these), which is kept when its count
        falls on the stride; only those are visited (the stride can grow as they are)."""
        n, held = len(texts), self._last
        # Until LAST_POINTS are held, ``candidate`` only counts and holds: all at once.
        i = min(n, LAST_POINTS - len(held))
        if i > 0:
            self._seen += i
            held.extend(zip(range(first_line, first_line + i), texts[:i], parsed[:i], strict=True))
        if i >= n:
            return
        # held is read as it is until the end, then extended
        start, m, seen = first_line + i - len(held), n - i, self._seen

        def item(j: int) -> tuple[int, str, Parsed | None]:
            if j < len(held):
                return held[j]
            k = i + j - len(held)
            return (start + j, texts[k], parsed[k])

        j = -(seen + 1 - LAST_POINTS) % self._stride
        while j < m and self._stride == 1:  # every one is kept: slices, not one by one
            k = min(m - j, max(1, MAX_POINTS - len(self._points) - len(self._pending)))
            self._pending.extend(item(x) for x in range(j, min(j + k, len(held))))
            if j + k > len(held):
                a, b = max(j, len(held)) - len(held) + i, j + k - len(held) + i
                self._pending.extend(
                    zip(range(first_line + a, first_line + b), texts[a:b], parsed[a:b], strict=True)
                )
            j += k
            if len(self._points) + len(self._pending) >= MAX_POINTS:
                self._parse_pending()  # the parses may halve the points and the stride
        j += -(seen + j + 1 - LAST_POINTS) % self._stride  # the next one the stride keeps
        while j < m:
            self._pending.append(item(j))
            if len(self._points) + len(self._pending) >= MAX_POINTS:
                self._parse_pending()  # the parses may halve the points and the stride
            j += 1
            j += -(seen + j + 1 - LAST_POINTS) % self._stride
        self._seen = seen + m
        a = max(i, n - LAST_POINTS)  # the new lines that stay held (the deque drops the rest)
        held.extend(zip(range(first_line + a, first_line + n), texts[a:], parsed[a:], strict=True))

    def _parse_pending(self) -> None:
        pending, self._pending = self._pending, []
        for line_no, text, parsed in pending:
            self._keep(line_no, text, parsed)

    def _keep(self, line_no: int, text: str, parsed: Parsed | None) -> None:
        if parsed is not None:
            self._points.append((line_no, *parsed))
        else:
            point = _point(line_no, text)
            if point is None:
                return
            self._points.append(point)
        if len(self._points) >= MAX_POINTS:
            self._points = self._points[::2]
            self._stride *= 2

    def timeline(self, lines: int, source: str = "") -> Timeline:
        self._parse_pending()
        tail = [
            p
            for p in (_point(n, t) if k is None else Point(n, *k) for n, t, k in self._last)
            if p is not None
        ]
        return Timeline(
            points=(*(p if isinstance(p, Point) else Point(*p) for p in self._points), *tail),
            running=tuple(self._running),
            finished_line=self._finished,
            lines=lines,
            source=source,
            nccl_connected=self._connected,
            nccl_past_opening=self._past_opening,
            bench_started=self._bench,
            bench_rows=self._bench_rows,
            bench_repeats=self._bench_repeats,
            init_started_line=self._init_started,
            init_done_line=self._init_done,
            alloc_wait_line=self._alloc_wait,
            alloc_granted_line=self._alloc_granted,
            device_guess_line=self._device_guess,
        )


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
