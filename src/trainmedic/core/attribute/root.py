"""Which primary event is the root cause (pure).

The earliest primary: by timestamp when both events carry one, by line order within one file,
by input order otherwise; on one line, the more specific signature. Then three corrections,
each a failure mechanism:

* a generic wrapper (NCCL "unhandled cuda error", whose category is only the likely one)
  yields to the detail line just below it ("Last error: Cuda failure ...");
* a failed transfer to a peer (IB retry exceeded, reset by peer) yields to the peer's own
  failure printed elsewhere in the job: it is what survivors see when a peer dies;
* kernel-log hardware evidence outranks a generic GPU/NCCL symptom it can explain, unless the
  clocks say it came clearly later.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.model import Category, Event

HARDWARE_LAG_S = 60.0
"""A kernel hardware event up to this much later than an app error still explains it."""

_EXPLAINABLE = frozenset({Category.UNKNOWN, Category.SYSTEM_SOFTWARE})
_SYMPTOM = re.compile(r"(?i)cuda|nccl|cublas|cudnn|nvml|gpu|xid|device|bus error|sigbus")


def _earlier(a: Event, b: Event, order: dict[int, int]) -> bool:
    if a.timestamp is not None and b.timestamp is not None and a.timestamp != b.timestamp:
        return a.timestamp < b.timestamp
    if a.source == b.source:
        if a.line == b.line:  # two signatures on one line: the one that says more
            return _specificity(a) > _specificity(b)
        return a.line < b.line
    return order[id(a)] < order[id(b)]


def _proven(event: Event) -> bool:
    """The event's line says its category, not only the usual cause of such lines (``likely``)."""
    return event.category is not Category.UNKNOWN and not event.likely


def _specificity(event: Event) -> tuple[bool, bool]:
    return (_proven(event), event.strong)


def _earliest(candidates: Sequence[Event], order: dict[int, int]) -> Event:
    best = candidates[0]
    for event in candidates[1:]:
        if _earlier(event, best, order):
            best = event
    return best


def _weak_gpu_symptom(root: Event, hw: Event) -> bool:
    """An app-log GPU error ("CUDA error: unknown error") the kernel's GPU record explains: the
    kernel line names the device and says how bad it is (Xid 79 drains, the app line cannot)."""
    return (
        root.category is Category.GPU_HARDWARE
        and hw.category is Category.GPU_HARDWARE
        and hw.strong
        and not root.strong
        and not root.evidence.is_system()
    )


def _hardware_outranks(hw: Event, root: Event) -> bool:
    # Only a generic GPU/communication failure is a symptom hardware can explain; the job's own
    # errors (OOM, asserts, exceptions: category application) stand on their own.
    explainable = root.category in _EXPLAINABLE or root.likely or _weak_gpu_symptom(root, hw)
    if not explainable or not _SYMPTOM.search(root.text):
        return False
    if hw.timestamp is not None and root.timestamp is not None:
        return hw.timestamp <= root.timestamp + HARDWARE_LAG_S
    return True


DETAIL_LINES = 8
"""How far below a generic error its detail lines ("Last error: ...") may sit."""


_EMPTY_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Failure):?\s*$")


def _specific_detail(root: Event, primaries: Sequence[Event]) -> Event:
    """A generic wrapper error (category unknown, e.g. NCCL's "unhandled cuda error") is
    followed by the line that says what failed ("Last error: Cuda failure 'out of memory'"):
    that line is the cause. So is an exception line whose message is empty (``AssertionError:``
    with a multi-line message below it): its message lines say what failed."""
    empty = _EMPTY_EXCEPTION.search(root.text) is not None
    if _proven(root) and not empty:
        return root
    details = [
        e
        for e in primaries
        if e.source == root.source
        and root.line < e.line <= root.line + DETAIL_LINES
        and _proven(e)
        and (not _proven(root) or e.category is not root.category)
    ]
    return min(details, key=lambda e: e.line) if details else root


def _kernel_xid_story(root: Event, primaries: Sequence[Event], order: dict[int, int]) -> Event:
    """A kernel log alone (no error of the job among the primaries) holding both Xids the
    application causes (13/31/43: its own faults) and a hardware Xid: the hardware record is the
    node's story, whichever came first."""
    if root.xid is None or root.category is not Category.APPLICATION:
        return root
    if any(not e.evidence.is_system() for e in primaries):
        return root
    hardware = [e for e in primaries if e.xid is not None and e.category.is_hardware()]
    return _earliest(hardware, order) if hardware else root


def choose_root(primaries: Sequence[Event], events: Sequence[Event]) -> Event:
    order = {id(e): i for i, e in enumerate(events)}
    for e in primaries:
        order.setdefault(id(e), len(order))
    root = _specific_detail(_earliest(primaries, order), primaries)
    root = _explained_peer_symptom(root, primaries, order)
    root = _kernel_xid_story(root, primaries, order)
    kernel_hw = [
        e
        for e in primaries
        if e.category.is_hardware() and (e.evidence.is_system() or e.strong) and e is not root
    ]
    if kernel_hw:
        hw = _earliest(kernel_hw, order)
        if _hardware_outranks(hw, root):
            return hw
    return root


_PEER_SYMPTOM = re.compile(
    r"Got completion from peer|[Tt]ransport retry count|RNR retry count|remote process exited"
    r"|(?:reset|closed) by (?:remote )?peer|Call to (?:recv|send) (?:from|to) \S+ failed : "
)
_NOT_PEER_CAUSE = frozenset({Category.NETWORK_HARDWARE, Category.UNKNOWN})


def _explained_peer_symptom(
    root: Event, primaries: Sequence[Event], order: dict[int, int]
) -> Event:
    """A failed transfer *to a peer* (IB retry exceeded, reset by peer) is what every survivor
    sees when that peer's process or node dies: the peer's own failure, printed anywhere in
    the job (interleaved rank output has no reliable order), is the better cause. The kernel's
    own link errors are not peer symptoms."""
    if (
        root.category is not Category.NETWORK_HARDWARE
        or root.evidence.is_system()
        or not _PEER_SYMPTOM.search(root.text)
    ):
        return root
    causes = [e for e in primaries if e is not root and e.category not in _NOT_PEER_CAUSE]
    return _earliest(causes, order) if causes else root
