"""A fabric link that is not up, or a link that keeps coming up: interface listings and the
kernel's link messages, read across lines.

* ``ifconfig`` / ``ip link`` list each interface with its flags. A fabric interface
  (InfiniBand ``ib0`` / ``ibp65s0``, Slingshot ``hsn0``) configured UP but without RUNNING
  (ifconfig) or with NO-CARRIER (ip) has no link: the port, its cable or the subnet manager.
  Ethernet ports are left out: an unused port configured up without a cable is common on
  healthy servers.
* A NIC driver printing "Link up" for the same interface again and again, with or without a
  "Link down" between (those are read elsewhere), is a link that flaps: the port, the cable,
  the transceiver or the switch port. ``FLAPS`` ups of one interface make the finding.
Both are read with little certainty (context rule ``link_state_guess``: 0.35).
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

FLAPS = 3
""""Link up" messages for one interface that make a flapping link."""

_FABRIC = r"(?:ib[a-z]?\d[\w.]*|ibp\w+|hsn\d+)"
_IFCONFIG = re.compile(rf"^({_FABRIC}): flags=\d+<([A-Z,_]*)>")
_IPLINK = re.compile(rf"^(?:\d+: )?({_FABRIC})(?:@\S+)?: <([A-Z,_-]*)>")
_LINK_UP = re.compile(
    r"\b(?:mlx\d_core|ice|i40e|ixgbe|bnxt_en|igb|e1000e|tg3|qede|cxi_core|ionic|ena|mlx4_en)"
    r"\s+\S+\s+(\w[\w.-]*): (?:NIC )?[Ll]ink (?:is )?[Uu]p\b"
)


class LinkStateParser:
    triggers: tuple[str, ...] = (": flags=", ": <", "ink up", "ink is up", "ink Up", "ink is Up")

    __slots__ = ("_reported", "_ups", "active")

    def __init__(self) -> None:
        self.active = False  # every line stands alone; the counts carry across lines
        self._ups: dict[str, int] = {}
        self._reported: set[str] = set()

    def feed(self, line_no: int, body: str) -> Finding | None:
        stripped = body.strip()
        ifconfig, iplink = _IFCONFIG.match(stripped), _IPLINK.match(stripped)
        listed = ifconfig or iplink
        if listed is not None:
            name, flags = listed.group(1), set(listed.group(2).split(","))
            # ifconfig says RUNNING when the link is up; ip says NO-CARRIER when it is not
            missing = "RUNNING" not in flags if ifconfig else "NO-CARRIER" in flags
            if "UP" not in flags or not missing:
                return None
            return self._finding(
                line_no, name, f"{name}: fabric interface up without a link ({stripped[:80]})"
            )
        up = _LINK_UP.search(body)
        if up is None:
            return None
        name = up.group(1)
        self._ups[name] = self._ups.get(name, 0) + 1
        if self._ups[name] < FLAPS:
            return None
        return self._finding(
            line_no, name, f"{name}: link came up {self._ups[name]} times: a flapping link"
        )

    def _finding(self, line_no: int, name: str, text: str) -> Finding | None:
        if name in self._reported:
            return None
        self._reported.add(name)
        return Finding(
            signature="link.state_suspect",
            category=Category.NETWORK_HARDWARE,
            kind=Kind.CRASH,
            role=Role.PRIMARY,
            line=line_no,
            text=text,
            action_hint=ActionHint.CHECK_NETWORK,
        )
