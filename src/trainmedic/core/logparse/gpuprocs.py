"""GPU memory held by a process that no longer runs: a leftover of an earlier job.

``nvidia-smi`` lists the processes holding each GPU's memory (its "Processes:" table, or
``--query-compute-apps=pid,used_memory`` as CSV); ``ps`` says what state each process is in.
A process that holds GPU memory while it is stopped (``T``: a job-control stop, Ctrl-Z, a
SIGSTOP nobody followed with SIGCONT) or a zombie (``Z``) will never free that memory by itself:
the next job placed on the GPU runs out of memory, or finds it busy, whatever it asks for. The
process outlived its job because nothing on the node killed what the job left behind (the
scheduler's cleanup: cgroups, an epilog, a process tracker): the scheduler's side, and the
job's memory request is not at fault. Read only where ``ps`` follows the GPU's process list
(both pasted from one node).
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

# nvidia-smi's table row: "|    0   N/A  N/A      1395      C   python     25081MiB |"
# (older drivers print no GI/CI columns), and the CSV of --query-compute-apps=pid,used_memory
_SMI_ROW = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?:\S+\s+\S+\s+)?(?P<pid>\d+)\s+[CGM+]+\s+\S.*?\s(?P<mib>\d+)\s*MiB\s*\|"
)
_CSV_ROW = re.compile(r"^\s*(?P<pid>\d+),\s*(?P<mib>\d+)\s*MiB\s*$")
# ps aux: USER PID %CPU %MEM VSZ RSS TTY STAT ...; ps -o pid,stat,...: PID STAT ...
_PS_AUX = re.compile(
    r"^\S+\s+(?P<pid>\d+)\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+\S+\s+(?P<stat>[A-Za-z<+]+)\s"
)
_PS_PIDSTAT = re.compile(r"^\s*(?P<pid>\d+)\s+(?P<stat>[A-Za-z<+]+)\s+\S")
_HELD_STATES = {"T": "stopped", "t": "stopped by a tracer", "Z": "a zombie"}
_PS_WINDOW = 40
"""Lines after the last GPU process row in which a ``ps`` listing is read as the same node's."""


class GpuProcessParser:
    triggers: tuple[str, ...] = ("MiB",)

    __slots__ = ("_held", "_quiet", "_reported", "active")

    def __init__(self) -> None:
        self.active = False  # after a GPU process row: ps rows hold no trigger
        self._held: dict[str, tuple[str, int]] = {}  # PID -> (GPU or "", MiB)
        self._quiet = 0
        self._reported: set[str] = set()

    def feed(self, line_no: int, body: str) -> Finding | None:
        row = _SMI_ROW.match(body) or _CSV_ROW.match(body)
        if row is not None:
            gpu = row.groupdict().get("gpu") or ""
            self._held[row.group("pid")] = (gpu, int(row.group("mib")))
            self.active, self._quiet = True, 0
            return None
        if not self._held:
            return None
        self._quiet += 1
        if self._quiet > _PS_WINDOW:
            self.active = False
            return None
        ps = _PS_AUX.match(body) or _PS_PIDSTAT.match(body)
        if ps is None:
            return None
        pid, state = ps.group("pid"), _HELD_STATES.get(ps.group("stat")[0])
        if state is None or pid not in self._held or pid in self._reported:
            return None
        self._reported.add(pid)
        gpu, mib = self._held[pid]
        where = f"GPU {gpu}" if gpu else "a GPU"
        return Finding(
            signature="gpuprocs.held_by_stopped_process",
            category=Category.SCHEDULER,
            kind=Kind.CRASH,  # the next job on the GPU fails to allocate
            role=Role.PRIMARY,
            line=line_no,
            text=f"process {pid} holds {mib} MiB on {where} while {state}: a leftover of an "
            "earlier job that the node's cleanup did not kill",
            gpu=gpu or None,
            action_hint=ActionHint.REQUEUE,
        )
