"""A collective measured over a group and over part of it, the whole group far slower.

Collective benchmarks and profilers that name the ranks of each measurement (Alpa's and Ray's
collective profiles: "AllReduce: [[0, 1, 2, 3, 4, 5, 6, 7]]  Bytes: 2.00000 GB  Time: 0.68 s
Bandwidth: 5.08 GB/s", a script printing "all_reduce ranks [0, 1, 2, 3] size 1 GB busbw 190
GB/s") let the log compare one operation over a group with the same operation over a subset of
that group. When the subset is the ranks of one node and the group spans nodes, the group's
bandwidth is what the links between the nodes allow: ten times or more below the subset's, the
network between the nodes limits every collective that crosses it (a cloud network's bandwidth,
a link that trained low, traffic on TCP instead of RDMA). That is a straggler of the network
(network_hardware, a guess at 0.35): the log does not say whether the network is degraded or
only slower than the job needs.

A healthy InfiniBand or RoCE cluster measures its inter-node collectives within a few times of
its NVLink ones, so a ratio under ``RATIO`` is no finding; so are rows of different operations
or message sizes, groups that do not contain one another (one slow node is another matter) and
a wider group that is the faster. Reads the sample of the input's lines ``analyze`` passes
(``JobFacts.text``); the live engine passes none and the mechanism is silent. Used only when
no failure line was found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Kind

RATIO = 10.0
"""The subset's bandwidth over the whole group's at or above which the links between limit."""
CONFIDENCE = 0.35

_ROW = re.compile(
    r"(?i)\b(?P<op>all[-_ ]?reduce|all[-_ ]?gather|reduce[-_ ]?scatter|broadcast"
    r"|all[-_ ]?to[-_ ]?all|send[-_ ]?recv)\b[^\n\[]{0,30}?"
    r"(?P<groups>\[\s*\[?\s*\d+(?:\s*,\s*\d+)+\s*\]"
    r"(?:\s*,\s*\[[\d,\s]*\])*\s*\]?)"
    r"(?:[^\n]*?\b(?:bytes|size)\s*[:=]?\s*(?P<size>\d+(?:\.\d+)?\s*[KMGT]?i?B)\b)?"
    r"[^\n]*?\b(?:bandwidth|busbw|algbw|bw)\s*[:=]?\s*(?P<bw>\d+(?:\.\d+)?)\s*"
    r"(?P<unit>GB/s|MB/s|Gb/s|Gbps)"
)
_FIRST_GROUP = re.compile(r"\[\s*(\d+(?:\s*,\s*\d+)+)\s*\]")
# GB/s per unit as printed (bytes upper-case B, bits lower-case b)
_PER_GBYTE = {"GB/s": 1.0, "MB/s": 0.001, "Gb/s": 0.125, "Gbps": 0.125}


@dataclass(frozen=True, slots=True)
class _Measure:
    op: str
    ranks: frozenset[int]
    size: str
    gbytes_per_s: float
    text: str


def _measure(line: str) -> _Measure | None:
    m = _ROW.search(line)
    if m is None:
        return None
    group = _FIRST_GROUP.search(m.group("groups"))
    if group is None:
        return None
    scale = _PER_GBYTE.get(m.group("unit"), 1.0)
    return _Measure(
        op=re.sub(r"[-_ ]", "", m.group("op").lower()),
        ranks=frozenset(int(r) for r in group.group(1).split(",")),
        size=re.sub(r"\s+", "", m.group("size") or "").lower(),
        gbytes_per_s=float(m.group("bw")) * scale,
        text=line.strip()[:160],
    )


def _comparable(wide: _Measure, part: _Measure) -> bool:
    return (
        wide.op == part.op
        and part.ranks < wide.ranks
        and (not wide.size or not part.size or wide.size == part.size)
    )


def group_slower_than_its_part(text: Sequence[str]) -> PhaseFinding | None:
    """The first (group, subset) pair of one operation whose subset measured ``RATIO`` times
    the group's bandwidth or more (see the module doc)."""
    measures = [m for line in text if (m := _measure(line)) is not None]
    for wide in measures:
        for part in measures:
            if not _comparable(wide, part) or wide.gbytes_per_s <= 0:
                continue
            ratio = part.gbytes_per_s / wide.gbytes_per_s
            if ratio >= RATIO:
                return PhaseFinding(
                    Category.NETWORK_HARDWARE,
                    Kind.STRAGGLER,
                    CONFIDENCE,
                    f"{wide.op} over {len(wide.ranks)} ranks measured {ratio:.0f}x below the "
                    f"same operation over {len(part.ranks)} of them ('{wide.text}'): the "
                    "links the wider group adds (between nodes) limit every collective that "
                    "crosses them",
                )
    return None
