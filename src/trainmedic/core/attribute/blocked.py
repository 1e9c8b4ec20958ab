"""A task the kernel reported blocked: a hang, placed by the frames of its call trace.

``INFO: task NAME:PID blocked for more than N seconds`` (the kernel's hung-task detector) is
failure evidence on its own: a process sat in uninterruptible sleep for minutes. Used only
when nothing above spoke (no primary error, no cascade, no teardown). The call trace printed
under it says what the task waited for: frames in file-system or block I/O wait
(``kernel.io_wait_frame``: NFS/SUNRPC, Lustre, GPFS, journals, write-back) make it a storage
hang; other frames leave the cause unknown, still a hang and never "no failure". A soft
lockup or RCU stall report (a CPU that stopped scheduling) is read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainmedic.core.attribute.blocked_kernel import reclaim_blocked
from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Event, Kind

HUNG_TASK = "kernel.hung_task"
STALLS = (HUNG_TASK, "kernel.soft_lockup")
IO_FRAME = "kernel.io_wait_frame"
TRACE_LINES = 60
"""Lines after the hung-task report that can hold its call trace."""

STORAGE_CONFIDENCE = 0.4
UNKNOWN_CONFIDENCE = 0.3


def blocked_task(events: Sequence[Event]) -> PhaseFinding | None:
    """The first hung-task report (else the first soft lockup), with the I/O-wait frames of
    its trace if there are any."""
    stalls = [e for e in events if e.signature in STALLS]
    hung = min(stalls, key=lambda e: e.signature != HUNG_TASK, default=None)
    if hung is None:
        return None
    what = "a task blocked" if hung.signature == HUNG_TASK else "a CPU stalled"
    frames = [
        e
        for e in events
        if e.signature == IO_FRAME
        and e.source == hung.source
        and 0 < e.line - hung.line <= TRACE_LINES
    ]
    if frames:
        names = ", ".join(sorted({_frame_name(e.text) for e in frames})[:3])
        return PhaseFinding(
            Category.STORAGE,
            Kind.HANG,
            STORAGE_CONFIDENCE,
            f"the kernel reported {what} at line {hung.line}, its call trace waiting "
            f"in file-system/block I/O ({names}): a hang on storage",
            hung,
        )
    reclaim = reclaim_blocked([e for e in stalls if e.signature == HUNG_TASK])
    if reclaim is not None:
        return reclaim
    return PhaseFinding(
        Category.UNKNOWN,
        Kind.HANG,
        UNKNOWN_CONFIDENCE,
        f"the kernel reported {what} at line {hung.line}, its trace naming no subsystem: "
        "a hang of unknown cause",
        hung,
    )


def _frame_name(text: str) -> str:
    """``[<ffff...>] ? pagevec_lookup_tag+0x21/0x30`` -> ``pagevec_lookup_tag``."""
    head = text.split("+0x", 1)[0]
    return head.split()[-1] if head.split() else head
