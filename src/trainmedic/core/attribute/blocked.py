"""A task the kernel reported blocked: a hang, placed by the frames of its call trace.

``INFO: task NAME:PID blocked for more than N seconds`` (the kernel's hung-task detector) is
failure evidence on its own: a process sat in uninterruptible sleep for minutes. Used only
when nothing above spoke (no primary error, no cascade, no teardown). The call trace printed
under it says what the task waited for: frames in file-system or block I/O wait
(``kernel.io_wait_frame``: NFS/SUNRPC, Lustre, GPFS, journals, write-back) make it a storage
hang; frames in the GPU driver's modules (``kernel.gpu_driver_frame``: nvidia, nvidia_uvm, ...)
make it the driver's (system software, a guess); other frames leave the cause unknown, still a
hang and never "no failure". A soft lockup or RCU stall report (a CPU that stopped scheduling)
is read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainmedic.core.attribute.blocked_kernel import reclaim_blocked
from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Event, Kind

HUNG_TASK = "kernel.hung_task"
STALLS = (HUNG_TASK, "kernel.soft_lockup")
IO_FRAME = "kernel.io_wait_frame"
DRIVER_FRAME = "kernel.gpu_driver_frame"
TRACE_LINES = 60
"""Lines after the hung-task report that can hold its call trace."""

STORAGE_CONFIDENCE = 0.4
UNKNOWN_CONFIDENCE = 0.3
DRIVER_CONFIDENCE = 0.3


def blocked_task(events: Sequence[Event]) -> PhaseFinding | None:
    """The first hung-task report (else the first soft lockup), with the I/O-wait frames of
    its trace if there are any."""
    stalls = [e for e in events if e.signature in STALLS]
    hung = min(stalls, key=lambda e: e.signature != HUNG_TASK, default=None)
    if hung is None:
        return None
    what = "a task blocked" if hung.signature == HUNG_TASK else "a CPU stalled"
    frames = _trace_frames(events, hung, IO_FRAME)
    if frames:
        names = _frame_names(frames)
        return PhaseFinding(
            Category.STORAGE,
            Kind.HANG,
            STORAGE_CONFIDENCE,
            f"the kernel reported {what} at line {hung.line}, its call trace waiting "
            f"in file-system/block I/O ({names}): a hang on storage",
            hung,
        )
    driver = _trace_frames(events, hung, DRIVER_FRAME)
    if driver:
        names = _frame_names(driver)
        return PhaseFinding(
            Category.SYSTEM_SOFTWARE,
            Kind.HANG,
            DRIVER_CONFIDENCE,
            f"the kernel reported {what} at line {hung.line}, its call trace inside the GPU "
            f"driver ({names}): a hang in the driver",
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


STACK_FRAMES = 3
"""I/O-wait frames a dumped kernel stack needs before it says where a task waits."""
STACK_CONFIDENCE = 0.35


def waiting_stack(events: Sequence[Event]) -> PhaseFinding | None:
    """A kernel stack printed with no hung-task report over it (``cat /proc/PID/stack``, a
    sysrq-w dump: how a user shows where a stuck process sleeps) whose frames wait in a file
    system's or the block layer's I/O (FUSE's request_wait_answer, NFS/SUNRPC, Lustre ptlrpc,
    write-back): the task hangs on storage. A stack sleeping elsewhere (a futex, a poll) is a
    process at rest and says nothing; so do one or two such frames inside another trace."""
    if any(e.signature in STALLS for e in events):
        return None
    frames = [e for e in events if e.signature == IO_FRAME]
    for first in frames:
        block = [first, *_trace_frames(frames, first, IO_FRAME)]
        if len(block) >= STACK_FRAMES:
            names = _frame_names(block)
            return PhaseFinding(
                Category.STORAGE,
                Kind.HANG,
                STACK_CONFIDENCE,
                f"a kernel stack at line {first.line} waits in file-system/block I/O "
                f"({names}) with no other failure line: a task hung on storage",
                first,
            )
    return None


def _trace_frames(events: Sequence[Event], hung: Event, signature: str) -> list[Event]:
    """The frames of ``signature`` in the trace printed under the report ``hung``."""
    return [
        e
        for e in events
        if e.signature == signature
        and e.source == hung.source
        and 0 < e.line - hung.line <= TRACE_LINES
    ]


def _frame_names(frames: Sequence[Event]) -> str:
    """Up to three distinct function names of ``frames``, for a basis."""
    return ", ".join(sorted({_frame_name(e.text) for e in frames})[:3])


def _frame_name(text: str) -> str:
    """``[<ffff...>] ? pagevec_lookup_tag+0x21/0x30`` -> ``pagevec_lookup_tag`` (and
    ``RIP: 0010:uvm_spin_loop+0x4e/0x90`` -> ``uvm_spin_loop``)."""
    head = text.split("+0x", 1)[0]
    word = head.split()[-1] if head.split() else head
    return word.rsplit(":", 1)[-1]
