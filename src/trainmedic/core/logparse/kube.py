"""``kubectl get pods`` tables: the STATUS column says how each pod ended.

The catalogue reads events and ``describe`` output line by line; a ``get pods`` row is only a
status among columns (``trainer-0   0/1   OOMKilled   3   12m``), read here once the header
(``NAME READY STATUS RESTARTS AGE``) has said where the column is.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

# status -> (category, role, kind): a table, one row per status a pod can end in.
POD_STATUSES: dict[str, tuple[Category, Role, Kind]] = {
    "Evicted": (Category.SCHEDULER, Role.PRIMARY, Kind.CRASH),
    "Preempting": (Category.SCHEDULER, Role.PRIMARY, Kind.CRASH),
    "NodeShutdown": (Category.SCHEDULER, Role.PRIMARY, Kind.CRASH),
    "OOMKilled": (Category.APPLICATION, Role.PRIMARY, Kind.CRASH),
    "NodeLost": (Category.NODE_HARDWARE, Role.PRIMARY, Kind.CRASH),
    "ContainerStatusUnknown": (Category.UNKNOWN, Role.CONTEXT, Kind.CRASH),
    "Error": (Category.UNKNOWN, Role.CONTEXT, Kind.CRASH),
    "CrashLoopBackOff": (Category.UNKNOWN, Role.CONTEXT, Kind.CRASH),
    "Init:Error": (Category.UNKNOWN, Role.CONTEXT, Kind.CRASH),
}
_HEADER = re.compile(r"^\s*NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\b")
_ROW = re.compile(r"^\s*(\S+)\s+\d+/\d+\s+(\S+)\s+\d+")


class PodTableParser:
    triggers: tuple[str, ...] = ("RESTARTS",)

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = False

    def feed(self, line_no: int, body: str) -> Finding | None:
        if _HEADER.match(body):
            self.active = True
            return None
        row = _ROW.match(body)
        if row is None:
            if body.strip() and not body.lstrip().startswith("..."):
                self.active = False
            return None
        found = POD_STATUSES.get(row.group(2))
        if found is None:
            return None
        category, role, kind = found
        return Finding(
            signature=f"kube.pod_{row.group(2).lower().replace(':', '_')}",
            category=category,
            kind=kind,
            role=role,
            line=line_no,
            text=body.strip(),
            action_hint=ActionHint.REQUEUE if category is Category.SCHEDULER else ActionHint.NONE,
        )
