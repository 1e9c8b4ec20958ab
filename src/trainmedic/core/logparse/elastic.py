"""torch.distributed.elastic's failure report: who exited, how, and when.

torchrun ends a failed run with a ``ChildFailedError`` table::

    Failures:
    [1]:
      time      : 2024-09-11_09:17:40
      host      : node3
      rank      : 5 (local_rank: 1)
      exitcode  : -15 (pid: 886323)
      traceback : Signal 15 (SIGTERM) received by PID 886323
    -------------------------------------
    Root Cause (first observed failure):
    [0]:
      ...

and, before it, ``failed (exitcode: -9) local_rank: 0 (pid: 2410412) of binary: ...``. The
"Root Cause" entry is only the first failure torchrun *observed*, often an innocent rank; the
culprit is the earliest entry whose exit is not a SIGTERM sent by torchrun itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainmedic.core.badinput import small_int

SIGTERM_EXITS = frozenset({-15, 143, 15})
SIGKILL_EXITS = frozenset({-9, 137})
SIGABRT_EXITS = frozenset({-6, 134})

_ENTRY = re.compile(r"\s*\[(\d+)\]:\s*$")
_FIELD = re.compile(r"\s+(time|host|rank|exitcode|error_file|traceback)\s*:(.*)")  # value: strip()
_RANK = re.compile(r"(-?\d+)(?:\s*\(local_rank:\s*(\d+)\))?")
_EXIT = re.compile(r"(-?\d+)")
_AGENT_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
# The table's traceback field on its own line, outside a parsed entry: a table pasted flattened
# (fields run together, labels on their own lines) still says which signal ended a child.
_LONE_SIGNAL = re.compile(r"\s*traceback\s*:\s*(Signal (\d+) \(SIG\w+\) received by PID \d+)", re.I)


@dataclass(frozen=True, slots=True)
class ChildFailure:
    line: int
    exitcode: int | None
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    time: str = ""  # torchrun's own "2024-09-11_09:17:37" (no zone): ordering key only
    root_cause_section: bool = False
    detail: str = ""  # the traceback field ("Signal 6 (SIGABRT) received by PID ...")

    @property
    def sigterm_victim(self) -> bool:
        return self.exitcode in SIGTERM_EXITS


class ChildFailureTracker:
    """Streams the table; ``feed`` returns an entry once its fields are complete."""

    __slots__ = ("_entry_done", "_fields", "_in_root", "_start")

    def __init__(self) -> None:
        self._start: int | None = None
        self._fields: dict[str, str] = {}
        self._in_root = False
        self._entry_done = False  # an entry of this section was already read

    def feed(self, line_no: int, body: str) -> ChildFailure | None:
        m = _AGENT_FAILED.search(body)
        if m:
            exitcode, local = small_int(m.group(1)), small_int(m.group(2))
            return ChildFailure(line=line_no, exitcode=exitcode, local_rank=local)
        if "Root Cause" in body:
            done = self._flush()
            self._in_root, self._entry_done = True, False
            return done
        if "Failures:" in body:
            done = self._flush()
            self._in_root, self._entry_done = False, False
            return done
        if self._start is not None:
            fm = _FIELD.match(body)
            if fm:
                self._fields[fm.group(1)] = fm.group(2).strip()
                return None
        em = _ENTRY.match(body)
        if em:
            done = self._flush()
            self._start = line_no
            return done
        if self._start is not None and body.strip():
            return self._flush()
        sm = _LONE_SIGNAL.match(body)
        signal = small_int(sm.group(2)) if sm else None
        if sm and signal is not None and not self._entry_done:
            return ChildFailure(line=line_no, exitcode=-signal, detail=sm.group(1))
        return None

    def close(self) -> ChildFailure | None:
        return self._flush()

    def _flush(self) -> ChildFailure | None:
        if self._start is None:
            return None
        fields, start = self._fields, self._start
        self._start, self._fields = None, {}
        if "exitcode" not in fields and "rank" not in fields:
            return None
        self._entry_done = True
        rank = local = exitcode = None
        rm = _RANK.match(fields.get("rank", ""))
        if rm:
            rank = small_int(rm.group(1))
            local = small_int(rm.group(2)) if rm.group(2) else None
        xm = _EXIT.match(fields.get("exitcode", ""))
        if xm:
            exitcode = small_int(xm.group(1))
        host = fields.get("host") or None
        return ChildFailure(
            line=start,
            exitcode=exitcode,
            rank=rank,
            local_rank=local,
            host=host,
            time=fields.get("time", ""),
            root_cause_section=self._in_root,
            detail=fields.get("traceback", ""),
        )
