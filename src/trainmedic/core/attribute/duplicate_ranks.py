"""Two processes claiming one global rank: the launch handed the nodes the same ranks.

PyTorch Lightning prints one line per process as it joins the process group ("initializing
ddp: GLOBAL_RANK: 2, MEMBER: 3/8", later "Initializing distributed: GLOBAL_RANK: 2, MEMBER:
3/8"). Each rank of the world should say so once per launch. When the first W claims of a
world of W repeat a rank while other ranks of that world are never claimed anywhere in the
log, every node computed the same ranks: the allocation's nodes or tasks per node differ from
what the trainer was told (``num_nodes`` / ``devices`` against ``--nodes`` /
``--ntasks-per-node``), or the node rank the launcher should set per node is missing. The
group waits forever for the ranks nobody holds: the scheduler's launch set-up (a hang, as a
guess). A restart prints every rank again after all of them were claimed once, and a log that
claims every rank somewhere is no finding.

Reads the sample of the input's lines ``analyze`` passes (``JobFacts.text``); the live engine
passes none and the mechanism is silent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Kind

CONFIDENCE = 0.4
"""A guess: the launch environment is the usual cause, a script that sets ranks itself another."""

_CLAIM = re.compile(
    r"(?i)initializing (?:ddp|distributed): GLOBAL_RANK: (\d+), MEMBER: (\d+)/(\d+)"
)


def ranks_claimed_twice(text: Sequence[str]) -> PhaseFinding | None:
    claims: dict[int, list[int]] = {}  # world size -> global ranks in the order claimed
    for line in text:
        if "GLOBAL_RANK" not in line:
            continue
        found = _CLAIM.search(line)
        if found is not None:
            claims.setdefault(int(found.group(3)), []).append(int(found.group(1)))
    for world, ranks in claims.items():
        first = ranks[:world]
        doubled = sorted({r for r in first if first.count(r) > 1})
        missing = sorted(set(range(world)) - set(ranks))
        if doubled and missing:
            return PhaseFinding(
                Category.SCHEDULER,
                Kind.HANG,
                CONFIDENCE,
                f"global rank(s) {_span(doubled)} of a world of {world} were claimed twice and "
                f"rank(s) {_span(missing)} never: every node computed the same ranks, the "
                "allocation's nodes / tasks per node differ from what the trainer was told",
            )
    return None


def _span(ranks: list[int]) -> str:
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))
