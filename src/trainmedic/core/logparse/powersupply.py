"""Power-supply inventories from the server's management tools: one block per supply.

``hpasmcli -s "SHOW POWERSUPPLY"`` prints ``Power supply #2`` and, indented below it,
``Condition: FAILED``; Dell's ``omreport chassis pwrsupplies`` prints ``Status : Critical``
inside its ``Power Supplies`` section; a Redfish ``PowerSupplies`` array carries
``"Health": "Critical"``. The failing value sits on its own line, away from the words "power
supply", so no single-line signature can read it: a supply whose condition is failed is the
node's hardware (replace the part); ``Ok`` / ``Redundant: No`` alone say nothing.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

_HEADER = re.compile(
    r"^\s*(?:Power [Ss]upply #?\s*\d+\s*$|Power Supplies(?: Information)?\s*$"
    r"|\"PowerSupplies\"\s*:|hpasmcli> SHOW POWERSUPPLY)"
)
_FAILED = re.compile(
    r"^\s*\"?(?:Condition|Status|Health)\"?\s*:\s*\"?(FAILED|Failed|Critical|CRITICAL"
    r"|Non-Recoverable|Failure)\b"
)
_MAX_BLOCK = 40
"""Lines after a header that can still belong to its section."""


class PowerSupplyParser:
    triggers: tuple[str, ...] = (
        "Power supply #",
        "Power Supply #",
        "Power Supplies",
        "PowerSupplies",
        "POWERSUPPLY",
    )

    __slots__ = ("_left", "_name", "active")

    def __init__(self) -> None:
        self.active = False
        self._name = ""
        self._left = 0

    def feed(self, line_no: int, body: str) -> Finding | None:
        if _HEADER.match(body):
            self._name = body.strip().rstrip(":")
            self.active, self._left = True, _MAX_BLOCK
            return None
        self._left -= 1
        if self._left <= 0:
            self.active = False
            return None
        failed = _FAILED.match(body)
        if failed is None:
            return None
        return Finding(
            signature="psu.condition_failed",
            category=Category.NODE_HARDWARE,
            kind=Kind.CRASH,
            role=Role.PRIMARY,
            line=line_no,
            text=f"{self._name}: {body.strip()}",
            action_hint=ActionHint.REBOOT_NODE,
        )
