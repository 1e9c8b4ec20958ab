"""``nvidia-smi -q -d TEMPERATURE``: a GPU held to a temperature limit set far below its own.

Each GPU reports the temperatures its firmware acts on: ``GPU Slowdown Temp`` (the hardware
slows its clocks), ``GPU Shutdown Temp``, and the limits software may lower: ``GPU Max
Operating Temp`` and ``GPU Target Temperature`` (set by the driver's thermal policy, a host
thermal daemon such as thermald, ``nvidia-smi -gtt``, a vendor tool). A limit set well below
the slowdown temperature, with the GPU running at it, makes the GPU throttle long before it
is hot: a straggler whose cause is the host's thermal configuration (system_software), not
an overheating or faulty GPU. The values are read as the block prints them, in any order;
the finding is made once all three are known.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

MARGIN_C = 15
"""A software limit this far below the slowdown temperature is a configured cap."""
AT_LIMIT_C = 3
"""The GPU runs at its limit when its temperature is within this of it."""

_ROW = re.compile(
    r"^\s*GPU (Current Temp|Slowdown Temp|Max Operating Temp|Target Temperature)\s*:\s*"
    r"(\d+) C\s*$"
)


class GpuLimitParser:
    triggers: tuple[str, ...] = (
        "GPU Current Temp",
        "GPU Slowdown Temp",
        "GPU Max Operating Temp",
        "GPU Target Temperature",
    )

    __slots__ = ("_seen", "active")

    def __init__(self) -> None:
        self.active = False  # every row is a trigger: no block state beyond the values
        self._seen: dict[str, int] = {}

    def feed(self, line_no: int, body: str) -> Finding | None:
        row = _ROW.match(body)
        if row is None:
            return None
        key = row.group(1)
        if key == "Current Temp" and "Current Temp" in self._seen:
            self._seen = {}  # the next GPU's block
        self._seen[key] = int(row.group(2))
        limits = [
            self._seen[k] for k in ("Max Operating Temp", "Target Temperature") if k in self._seen
        ]
        current, slowdown = self._seen.get("Current Temp"), self._seen.get("Slowdown Temp")
        if not limits or current is None or slowdown is None:
            return None
        limit = min(limits)
        if limit > slowdown - MARGIN_C or current < limit - AT_LIMIT_C:
            return None
        self._seen = {}
        return Finding(
            signature="nvsmi.limit_set_low",
            category=Category.SYSTEM_SOFTWARE,
            kind=Kind.STRAGGLER,
            role=Role.PRIMARY,
            line=line_no,
            text=f"GPU temperature limit {limit} C set far below its slowdown temperature "
            f"{slowdown} C, running at {current} C: a configured thermal cap",
            action_hint=ActionHint.FIX_CONFIG,
        )
