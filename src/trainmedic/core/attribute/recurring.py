"""Recurring hardware context: a stream of corrected errors is a part wearing out.

One corrected memory error, one NIC reset, one corrected PCIe error is noise the hardware
handled, and the catalogue keeps such lines as context (never a cause). The same record
repeated on one node is another story: ECC corrects the reads of a DIMM whose cells are
failing, a NIC resets itself in a loop, a link keeps retraining. Operators replace such
parts; the verdict names the part's category, with low confidence (a guess never drains).

From the kernel these lines already count (the kernel's own word); this mechanism lets the
same records count when they come from a tool that printed them without a kernel prefix
(``ras-mc-ctl --errors``, a BMC's event list, a pasted excerpt), provided they recur.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.model import Event, Role

RECURRING_MIN = 3
"""This many records of one hardware context signature on one node make it a pattern."""

_LIMIT_REACHED = re.compile(r"(?i)\blogging limit (?:reached|removed)\b")
"""A controller's own count of the recurrence: it stops logging corrected errors of a part
(and says so, and says when it starts again) only after they kept coming past its threshold,
so one such record stands for the stream (IPMI SEL, Lenovo XCC/IMM, Dell iDRAC)."""


def recurring_context(events: Sequence[Event]) -> dict[int, str]:
    """``id(event)`` -> a basis note, for the weak hardware context events that recur."""
    groups: dict[tuple[str, str], list[Event]] = {}
    for e in events:
        if e.role is Role.CONTEXT and e.category.is_hardware() and not e.strong:
            groups.setdefault((e.signature, e.node or ""), []).append(e)
    found: dict[int, str] = {}
    for (signature, node), group in groups.items():
        if len(group) < RECURRING_MIN and not any(_LIMIT_REACHED.search(e.text) for e in group):
            continue
        where = f" on {node}" if node else ""
        note = (
            f"mechanism (recurring): {len(group)} record(s) of {signature}{where}: corrected "
            "errors or resets that keep coming (or a logging limit they reached) are a part "
            "wearing out"
        )
        for e in group:
            found[id(e)] = note
    return found
