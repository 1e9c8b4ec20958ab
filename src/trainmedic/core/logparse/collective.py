"""What the ranks say about the collectives they were in, besides the watchdog's timeout line.

* NCCL's ``NCCL_DEBUG=INFO`` (``COLL`` subsystem) prints every collective a process enqueues:
  ``node:pid:tid [dev] NCCL INFO AllReduce: opCount 28c ... comm 0x55.. [nranks=4]``. The last
  ones of each process show whether all ranks were in the same collective when the job hung.
* The program's own frames (a traceback, a rich panel, py-spy) name the collective a rank
  waited in: ``dist.all_reduce(...)``, ``in all_gather_into_tensor``.
* Flight Recorder analyses (``torch.distributed.flight_recorder`` / ``fr_trace``) and DeepSpeed
  say outright when ranks did not join the same collective.

Kept bounded: the last ``PER_PROCESS`` NCCL ops of at most ``MAX_PROCESSES`` processes, the
last ``MAX_FRAMES`` collective frames and ``MAX_NOTES`` analyser notes.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

PER_PROCESS = 4
MAX_PROCESSES = 4096
MAX_FRAMES = 64
MAX_NOTES = 32

_OPCOUNT = re.compile(
    r"([\w.-]+):(\d+):\d+ \[(\d+)\] NCCL INFO (\w+): opCount ([0-9a-fA-F]+)\b"
    r".*?\bcomm (0x[0-9a-fA-F]+) \[nranks=(\d+)\]"
)
_FRAME_OP = re.compile(
    r"(?:dist\.|, in |c10d\.py\S*\s+in\s+)"
    r"(all_reduce|all_gather(?:_into_tensor|_object|_base)?|broadcast(?:_object_list)?"
    r"|reduce_scatter(?:_tensor)?|all_to_all(?:_single)?|barrier|monitored_barrier|reduce|gather"
    r"|scatter)\b"
)
_NOTE = re.compile(
    r"Not all ranks joining collective|[Cc]ollective (?:type|size|sequence|state) mismatch"
    r"|Detected mismatch between collectives|ranks? (?:are|is) in different collectives"
    r"|expected module \d+, but got module \d+"
)


_TRIGGERS = ("opCount", "dist.", "c10d.py", ", in ", "ollective", "expected module")


@dataclass(frozen=True, slots=True)
class NcclOp:
    process: str  # "node:pid:dev"
    op: str  # "AllReduce"
    count: int  # opCount
    nranks: int
    line: int
    comm: str = ""  # the communicator's address in that process


@dataclass(frozen=True, slots=True)
class FrameOp:
    line: int
    op: str  # "all_reduce"


@dataclass(frozen=True, slots=True)
class CollectiveTrace:
    nccl_ops: tuple[NcclOp, ...] = ()  # the last few of each process
    frame_ops: tuple[FrameOp, ...] = ()
    notes: tuple[tuple[int, str], ...] = ()  # (line, text) of analyser / framework desync notes


class CollectiveTracker:
    __slots__ = ("_frames", "_notes", "_ops")

    def __init__(self) -> None:
        self._ops: dict[str, deque[NcclOp]] = {}
        self._frames: deque[FrameOp] = deque(maxlen=MAX_FRAMES)
        self._notes: list[tuple[int, str]] = []

    @staticmethod
    def wants(text: str) -> bool:
        """Whether ``observe`` has anything to do with the line (memoisable per shape)."""
        return any(t in text for t in _TRIGGERS)

    def observe(self, line_no: int, text: str) -> None:
        if "opCount" in text:
            self._opcount(line_no, text)
        if "dist." in text or "c10d.py" in text or ", in " in text:
            m = _FRAME_OP.search(text)
            if m is not None and "NCCL INFO" not in text:
                self._frames.append(FrameOp(line_no, m.group(1)))
        if ("ollective" in text or "expected module" in text) and len(self._notes) < MAX_NOTES:
            m = _NOTE.search(text)
            if m is not None:
                self._notes.append((line_no, text.strip()[:300]))

    def _opcount(self, line_no: int, text: str) -> None:
        m = _OPCOUNT.search(text)
        if m is None:
            return
        process = f"{m.group(1)}:{m.group(2)}:{m.group(3)}"
        ops = self._ops.get(process)
        if ops is None:
            if len(self._ops) >= MAX_PROCESSES:
                return
            ops = self._ops[process] = deque(maxlen=PER_PROCESS)
        ops.append(
            NcclOp(process, m.group(4), int(m.group(5), 16), int(m.group(7)), line_no, m.group(6))
        )

    def trace(self) -> CollectiveTrace:
        return CollectiveTrace(
            nccl_ops=tuple(op for ops in self._ops.values() for op in ops),
            frame_ops=tuple(self._frames),
            notes=tuple(self._notes),
        )
