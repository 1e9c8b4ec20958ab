"""``ibstat`` / ``ibstatus`` / ``ibv_devinfo`` output: the state of each InfiniBand port.

Each tool prints one block per HCA (``CA 'mlx5_0'``, ``Infiniband device 'mlx5_0' port 1
status:``, ``hca_id: mlx5_0``) and, per port, its logical ``State`` (Active, or Down /
Initializing / Armed) and its physical state. A port that is not Active on a node whose job
uses the fabric is the network's failure (an uncabled or dead link, a port the subnet manager
never brought up); an Active port says nothing.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

_HEADER = re.compile(r"^\s*(?:CA '([\w.-]+)'|hca_id:\s*([\w.-]+)|Infiniband device '([\w.-]+)')")
_STATE = re.compile(r"^\s+(?:State|state):\s*(?:\d+:\s*)?(?:PORT_)?([A-Za-z]+)")
_BAD_STATES = frozenset({"down", "init", "initializing", "armed"})
_MAX_BLOCK = 60
"""Lines after a header that can still belong to its block (ibv_devinfo -v is the longest)."""


class IbstatParser:
    triggers: tuple[str, ...] = ("CA '", "hca_id:", "Infiniband device '")

    __slots__ = ("_device", "_left", "active")

    def __init__(self) -> None:
        self.active = False
        self._device = ""
        self._left = 0

    def feed(self, line_no: int, body: str) -> Finding | None:
        header = _HEADER.match(body)
        if header:
            self._device = next(g for g in header.groups() if g)
            self.active, self._left = True, _MAX_BLOCK
            return None
        self._left -= 1
        if self._left <= 0 or (body and not body[0].isspace() and ":" not in body):
            self.active = False
            return None
        state = _STATE.match(body)
        if state is None or state.group(1).lower() not in _BAD_STATES:
            return None
        return Finding(
            signature="ibstat.port_not_active",
            category=Category.NETWORK_HARDWARE,
            kind=Kind.CRASH,
            role=Role.PRIMARY,
            line=line_no,
            text=f"{self._device}: {body.strip()}",
            action_hint=ActionHint.CHECK_NETWORK,
        )
