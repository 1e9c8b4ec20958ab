"""Blocked tasks that are the kernel's own memory management: the kernel, not the job.

The hung-task detector names the task it found blocked. When that task is one of the
kernel's memory-reclaim threads (``kswapd``, ``kcompactd``, ``khugepaged``, the OOM reaper),
reclaim itself is stuck: every allocation on the node then waits behind it, so the job's
processes, the container runtime and the journal block too, whichever of them the detector
reports first. Without I/O-wait frames in the trace (``blocked.py`` reads those as storage)
the likeliest story is the kernel's memory management (a kernel or OS image regression, a
swap or cgroup setting): system_software, a guess at 0.35.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Event, Kind

RECLAIM_CONFIDENCE = 0.35

_TASK = re.compile(r"\btask ([^\s:]+):\d+ blocked for more than")
_RECLAIM = re.compile(r"^(?:kswapd\d*|kcompactd\d*|khugepaged|oom_reaper)$")


def reclaim_blocked(hung: Sequence[Event]) -> PhaseFinding | None:
    """A memory-reclaim thread among the blocked tasks (``hung``: hung-task events), if any."""
    for event in hung:
        m = _TASK.search(event.text)
        if m is None or not _RECLAIM.match(m.group(1)):
            continue
        others = sorted({t.group(1) for e in hung if (t := _TASK.search(e.text))} - {m.group(1)})
        also = f" (blocked with it: {', '.join(others[:4])})" if others else ""
        return PhaseFinding(
            Category.SYSTEM_SOFTWARE,
            Kind.HANG,
            RECLAIM_CONFIDENCE,
            f"the kernel reported its memory-reclaim thread {m.group(1)} blocked at line "
            f"{event.line}{also}, with no I/O wait in the trace: the kernel's memory "
            "management is stuck (a kernel or OS image regression, swap or cgroup settings)",
            event,
        )
    return None
