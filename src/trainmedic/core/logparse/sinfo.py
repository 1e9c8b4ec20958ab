"""Slurm's ``sinfo`` partition table: a partition that holds no node at all.

``sinfo`` prints one row per partition and node state ("PARTITION AVAIL TIMELIMIT NODES STATE
NODELIST"); a partition with no node is a single row of 0 nodes in state ``n/a`` (``sinfo -s``:
NODES(A/I/O/T) ``0/0/0/0``). Every job sent there pends (as "Resources") until nodes join: a
cloud cluster whose resume program cannot start instances (the provider's API refusing, a
quota, a broken image) or a partition defined without nodes. Powered-down cloud nodes still
count (``idle~``), so a row of 0 is not an idle cluster. Named the scheduler as a guess
(``likely``): a partition kept empty on purpose prints the same row.
"""

from __future__ import annotations

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, EvidenceSource, Kind, Role


class SinfoParser:
    triggers: tuple[str, ...] = ("PARTITION",)

    __slots__ = ("_nodes", "_state", "active")

    def __init__(self) -> None:
        self.active = False
        self._nodes = 0  # column indexes of NODES (or NODES(A/I/O/T)) and STATE
        self._state: int | None = None

    def feed(self, line_no: int, body: str) -> Finding | None:
        cells = body.split()
        if cells[:2] == ["PARTITION", "AVAIL"]:
            nodes = [i for i, c in enumerate(cells) if c.startswith("NODES")]
            self.active = bool(nodes)
            self._nodes = nodes[0] if nodes else 0
            self._state = cells.index("STATE") if "STATE" in cells else None
            return None
        if not self.active:
            return None
        if len(cells) <= self._nodes or cells[1] not in ("up", "down", "drain", "inact"):
            self.active = False  # the table ended
            return None
        count = cells[self._nodes]
        state = cells[self._state] if self._state is not None and self._state < len(cells) else ""
        empty = count == "0/0/0/0" or (count == "0" and state == "n/a")
        if not empty:
            return None
        return Finding(
            signature="sinfo.partition_without_nodes",
            category=Category.SCHEDULER,
            kind=Kind.HANG,
            role=Role.PRIMARY,
            line=line_no,
            text=body.strip()[:300],
            evidence=EvidenceSource.SCHEDULER,
            action_hint=ActionHint.NONE,
            likely=True,
        )
