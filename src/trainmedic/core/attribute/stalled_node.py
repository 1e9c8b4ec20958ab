"""A collective stall in which every rank of one node block is missing: the node, not the code.

Horovod's stall inspector (and the same list in other launchers' words) names the ranks that
never submitted a collective the others wait in. When the job's code takes another path on
some ranks (rank 0 validates or logs alone, a rank runs out of data), the missing ranks are
those that branch: one rank, or ranks scattered by their data. Code that branches by rank does
not take the ranks of one node, and only those, out together. A missing set that is a whole
aligned block of consecutive ranks (0-7, 8-15; at least 4, a power of two, as ranks are laid
out node by node) is one node stalled as a whole: the communication between the nodes (the
transport library and its settings: tensor fusion, cycle time, the provider; or the link), a
guess at 0.4 (the platform's, so the policy restarts rather than stops on the code).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Event

STALL_SIGNATURES = frozenset({"horovod.stalled_ranks"})
MIN_BLOCK = 4
"""The fewest ranks a block must hold to stand for a node (nodes hold 4, 8 or 16 GPUs)."""

_MISSING = re.compile(r"missing ranks?: ?\[?(?P<ranks>\d+(?:, ?\d+)*)")


def _node_block(ranks: Sequence[int]) -> tuple[int, int] | None:
    """(first, last) when ``ranks`` is a whole aligned block of consecutive ranks."""
    size = len(ranks)
    if size < MIN_BLOCK or size & (size - 1):
        return None
    first = ranks[0]
    if list(ranks) != list(range(first, first + size)) or first % size:
        return None
    return first, first + size - 1


def whole_node_missing(root: Event, events: Sequence[Event]) -> PhaseFinding | None:
    """The node-level reading of a stall whose missing ranks are all one node block, when
    every stall list in the job names such a block (a list with one rank is the code's)."""
    if root.signature not in STALL_SIGNATURES:
        return None
    blocks = []
    for event in events:
        if event.signature not in STALL_SIGNATURES:
            continue
        m = _MISSING.search(event.text)
        if m is None:
            continue
        ranks = sorted({int(r) for r in re.findall(r"\d+", m.group("ranks"))})
        block = _node_block(ranks)
        if block is None:
            return None
        blocks.append(block)
    if not blocks:
        return None
    first, last = blocks[0]
    return PhaseFinding(
        Category.SYSTEM_SOFTWARE,
        root.kind,
        0.4,
        f"the stalled collective misses ranks {first}-{last}, a whole node block and nothing "
        "else: code that branches by rank does not take one node's ranks out together; the "
        "communication between the nodes (transport library settings, the link) stalled",
        root,
    )
