"""Slurm's own view of a job: ``sacct`` and ``squeue`` tables and ``scontrol show job``.

The state Slurm recorded names the mechanism when the job's output does not: TIMEOUT,
PREEMPTED and DEADLINE are the scheduler's; NODE_FAIL and BOOT_FAIL a node's; OUT_OF_MEMORY the
job's own memory limit; a CANCELLED job was ended by someone (the scheduler category: requeue
it). A *step* cancelled is what srun does to the other tasks when one fails, so it is only a
cascade; FAILED says that the job failed, not why (context for the evidence layer).

``sacct`` columns are read where the header (and its dashes line) put them, so empty cells
do not shift the State column; ``--parsable`` output (``|``-separated) works the same way.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, EvidenceSource, Kind, Role

# Slurm job state (sacct/scontrol name, squeue code) -> (category, role of a job, hint)
STATES: dict[str, tuple[Category, Role, ActionHint]] = {
    "TIMEOUT": (Category.SCHEDULER, Role.PRIMARY, ActionHint.REQUEUE),
    "PREEMPTED": (Category.SCHEDULER, Role.PRIMARY, ActionHint.REQUEUE),
    "DEADLINE": (Category.SCHEDULER, Role.PRIMARY, ActionHint.REQUEUE),
    "CANCELLED": (Category.SCHEDULER, Role.PRIMARY, ActionHint.REQUEUE),
    "NODE_FAIL": (Category.NODE_HARDWARE, Role.PRIMARY, ActionHint.REBOOT_NODE),
    "BOOT_FAIL": (Category.NODE_HARDWARE, Role.PRIMARY, ActionHint.REBOOT_NODE),
    "OUT_OF_MEMORY": (Category.APPLICATION, Role.PRIMARY, ActionHint.FIX_CONFIG),
    "FAILED": (Category.UNKNOWN, Role.CONTEXT, ActionHint.NONE),
}
SQUEUE_CODES = {
    "TO": "TIMEOUT",
    "PR": "PREEMPTED",
    "DL": "DEADLINE",
    "CA": "CANCELLED",
    "NF": "NODE_FAIL",
    "BF": "BOOT_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "F": "FAILED",
}
_SCONTROL = re.compile(r"\bJobState=([A-Z_]+)")


def _state(cell: str) -> str:
    """``CANCELLED by 1000`` / ``OUT_OF_ME+`` -> the state name."""
    word = cell.strip().split(" ")[0].rstrip("+")
    if word.startswith("OUT_OF_ME"):
        return "OUT_OF_MEMORY"
    return word


class SlurmStateParser:
    triggers: tuple[str, ...] = ("JobID", "JobState=", "JOBID")

    __slots__ = ("_pipe", "_span", "_squeue", "_token", "active")

    def __init__(self) -> None:
        self.active = False
        self._span: tuple[int, int] | None = None  # the State column, from the dashes line
        self._token: int | None = None  # the State column's index among split cells
        self._pipe = False
        self._squeue = False

    def feed(self, line_no: int, body: str) -> Finding | None:
        if "JobState=" in body:
            m = _SCONTROL.search(body)
            return self._finding(line_no, body, m.group(1), step=False) if m else None
        header = body.strip()
        if header.startswith(("JobID", "JOBID")) and (
            " State" in body or "|State" in body or " ST " in body
        ):
            self._start(header)
            return None
        if not self.active or not header:
            return None
        if set(header) <= {"-", " ", "+"}:
            self._span = self._dash_span(body)
            return None
        return self._row(line_no, body)

    def _start(self, header: str) -> None:
        self.active, self._span = True, None
        self._pipe = "|" in header
        self._squeue = header.startswith("JOBID")
        cells = header.split("|") if self._pipe else header.split()
        name = "ST" if self._squeue else "State"
        self._token = cells.index(name) if name in cells else None
        if self._token is None:
            self.active = False

    def _dash_span(self, body: str) -> tuple[int, int] | None:
        dashes = list(re.finditer(r"-+", body))
        if self._token is None or self._token >= len(dashes):
            return None
        return dashes[self._token].start(), dashes[self._token].end()

    def _row(self, line_no: int, body: str) -> Finding | None:
        if self._pipe:
            cells = body.strip().split("|")
        elif self._span is not None:
            cells = [body[self._span[0] : self._span[1] + 12]]  # CANCELLED by 1000 overruns
        else:
            cells = body.split()
        index = 0 if (self._span is not None and not self._pipe) else self._token
        if index is None or index >= len(cells):
            return None
        cell = cells[index]
        state = SQUEUE_CODES.get(cell.strip(), "") if self._squeue else _state(cell)
        first = (body.strip().split("|") if self._pipe else body.split() or [""])[0]
        return self._finding(line_no, body, state, step="." in first)

    def _finding(self, line_no: int, body: str, state: str, step: bool) -> Finding | None:
        found = STATES.get(state)
        if found is None:
            return None
        category, role, hint = found
        if step and state == "CANCELLED":
            role = Role.CASCADE  # srun cancels the other steps' tasks when one fails
        return Finding(
            signature=f"slurm_state.{state.lower()}",
            category=category,
            kind=Kind.CRASH,
            role=role,
            line=line_no,
            text=body.strip()[:300],
            evidence=EvidenceSource.SCHEDULER,
            action_hint=hint,
        )
