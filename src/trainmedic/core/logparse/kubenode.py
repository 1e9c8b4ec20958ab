"""``kubectl describe node`` / ``get node -o yaml``: accelerators the node has but cannot offer.

A node's ``Capacity`` counts the devices its device plugin found; ``Allocatable`` those it
still offers. The NVIDIA (and AMD, Intel, Habana, Neuron) device plugins take a device out of
``Allocatable`` when its health check fails (an Xid, an ECC error, a device that stopped
answering), so fewer allocatable than capacity on an accelerator resource is a device marked
unhealthy: the GPU's hardware, read from two blocks no single line shows together.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

_BLOCK = re.compile(r"^\s*(Capacity|Allocatable|capacity|allocatable):\s*$")
_RESOURCE = re.compile(
    r"^\s+((?:nvidia\.com/gpu|amd\.com/gpu|gpu\.intel\.com/\w+|habana\.ai/gaudi\w*"
    r"|aws\.amazon\.com/neuron\w*)):\s*\"?(\d+)\"?\s*$"
)
_ENTRY = re.compile(r"^\s+[\w./-]+:\s*\S")


class NodeResourcesParser:
    triggers: tuple[str, ...] = ("Capacity:", "Allocatable:", "capacity:", "allocatable:")

    __slots__ = ("_block", "_seen", "active")

    def __init__(self) -> None:
        self.active = False
        self._block = ""
        self._seen: dict[tuple[str, str], int] = {}  # (block, resource) -> count

    def feed(self, line_no: int, body: str) -> Finding | None:
        header = _BLOCK.match(body)
        if header:
            self._block = header.group(1).lower()
            self.active = True
            return None
        if not _ENTRY.match(body):
            self.active = False
            return None
        resource = _RESOURCE.match(body)
        if resource is None:
            return None
        name, count = resource.group(1), int(resource.group(2))
        self._seen[(self._block, name)] = count
        capacity = self._seen.get(("capacity", name))
        allocatable = self._seen.get(("allocatable", name))
        if capacity is None or allocatable is None or allocatable >= capacity:
            return None
        return Finding(
            signature="kube.device_unhealthy",
            category=Category.GPU_HARDWARE,
            kind=Kind.CRASH,
            role=Role.PRIMARY,
            line=line_no,
            text=f"{name}: allocatable {allocatable} < capacity {capacity} "
            f"({capacity - allocatable} device(s) marked unhealthy)",
            action_hint=ActionHint.RESET_GPU,
        )
