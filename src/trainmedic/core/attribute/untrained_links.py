"""NVLink reported down on every link of a GPU: links that never trained, not links that broke.

DCGM's health watch and diagnostic report each NVLink whose state is down ("GPU 0's NvLink
link 3 is currently down", DCGM_FR_NVLINK_DOWN) and "Only N NvLinks are up out of the expected
M". A link that fails in service is one link, or a few scattered ones (its lane, its cable, the
switch port it meets), and comes with Xid 74 and error counters. A GPU on which the listing is
link 0, link 1, ... in a row (or none of the expected links up) is a GPU whose links never came
up: a PCIe card with no NVLink bridge fitted, which DCGM still watches for links, or a fabric
not set up. That is the node's inventory, not a fault the job met, so these reports (and the
health report's overall "Failure" that rests on them alone) are not failure evidence; a job
hurt by missing links fails with its own line. The listing must start at link 0 and name at
least two links in a row: one link down, or links elsewhere in the range, stay the GPU's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.model import Event

HEALTH_REPORT = "gpu.health_report_failed"
FAULT_MESSAGE = "dcgm.gpu_fault_message"

_LINK_DOWN = re.compile(r"GPU (\d+)(?:'s)? NvLink link (\d+) is currently down")
_NONE_UP = re.compile(r"Only 0 NvLinks are up out of the expected [1-9]\d*")
_OVERALL = re.compile(r"Overall Health")

MIN_LINKS_IN_A_ROW = 2
"""Links listed down from link 0 in a row that read as a GPU without NVLink, not a lost link."""


def _never_trained(links: set[int]) -> bool:
    return len(links) >= MIN_LINKS_IN_A_ROW and links == set(range(len(links)))


def untrained_link_reports(events: Sequence[Event]) -> frozenset[int]:
    """The ``id``s of the DCGM reports that only say some GPUs' links never came up (and of
    the overall health failure resting on them alone); empty when any report says more."""
    reports = [e for e in events if e.signature in (HEALTH_REPORT, FAULT_MESSAGE)]
    down: dict[str, set[int]] = {}
    idle: list[Event] = []
    overall: list[Event] = []
    for event in reports:
        if event.signature == HEALTH_REPORT:
            if not _OVERALL.search(event.text):
                return frozenset()  # a row remap pending or failed: the GPU's memory
            overall.append(event)
            continue
        link = _LINK_DOWN.search(event.text)
        if link is not None:
            down.setdefault(link.group(1), set()).add(int(link.group(2)))
        elif not _NONE_UP.search(event.text):
            return frozenset()  # an ECC error, an Xid, a retired page: a fault the GPU had
        idle.append(event)
    if not idle or not all(_never_trained(links) for links in down.values()):
        return frozenset()
    return frozenset(id(e) for e in (*idle, *overall))
