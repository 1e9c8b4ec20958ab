"""Tool output that is not a log line: blocks and tables a person pastes beside a job's log.

``ibstat``, ``nvidia-smi -q``, ``dcgmi diag``, ``sacct``/``squeue``/``scontrol``, ``kubectl get
pods`` and the BMC's event log say what failed through *structure* (a port's state inside its
HCA block, a counter inside an ECC section, a table column), which no single-line signature can
read. Each format has its own small parser (``ibstat.py``, ``nvsmi.py``, ``slurmstate.py``,
``kube.py``, ``ipmi.py``, ``nvlink.py``, ``raystatus.py``); this module runs them over a file's
lines and turns what they find into ``Finding`` values, which the scan makes into events like
any catalogue hit.

Cost: a parser sees a line only when it is inside one of its blocks or the line holds one of
its trigger strings (one combined regex scan per line for all parsers).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.model import ActionHint, Category, EvidenceSource, Kind, Role


@dataclass(frozen=True, slots=True)
class Finding:
    """What a structured parser read: one failure (or context) at one line."""

    signature: str  # "ibstat.port_down": the parser's name, dot, what it found
    category: Category
    kind: Kind
    role: Role
    line: int
    text: str
    evidence: EvidenceSource = EvidenceSource.APP_LOG
    node: str | None = None
    gpu: str | None = None
    action_hint: ActionHint = ActionHint.NONE
    strong: bool = False
    likely: bool = False  # the usual cause of what was read, not proof of it (a guess, 0.45)


class BlockParser(Protocol):
    """One tool's output format. ``active`` while inside one of its blocks or tables."""

    triggers: tuple[str, ...]
    active: bool

    def feed(self, line_no: int, body: str) -> Finding | None: ...


def _parsers() -> list[BlockParser]:
    # Imported here: each parser module imports Finding from this one.
    from trainmedic.core.logparse.cqedump import CqeDumpParser
    from trainmedic.core.logparse.gpuprocs import GpuProcessParser
    from trainmedic.core.logparse.ibstat import IbstatParser
    from trainmedic.core.logparse.ipmi import SelParser
    from trainmedic.core.logparse.kube import PodTableParser
    from trainmedic.core.logparse.kubenode import NodeResourcesParser
    from trainmedic.core.logparse.linkstate import LinkStateParser
    from trainmedic.core.logparse.nvlink import NvlinkStatusParser
    from trainmedic.core.logparse.nvsmi import DcgmiDiagParser, NvidiaSmiParser
    from trainmedic.core.logparse.nvsmi_limits import GpuLimitParser
    from trainmedic.core.logparse.powersupply import PowerSupplyParser
    from trainmedic.core.logparse.raystatus import RayStatusParser
    from trainmedic.core.logparse.sinfo import SinfoParser
    from trainmedic.core.logparse.slurmstate import SlurmStateParser

    return [
        IbstatParser(),
        NvidiaSmiParser(),
        DcgmiDiagParser(),
        SlurmStateParser(),
        SinfoParser(),
        PodTableParser(),
        SelParser(),
        PowerSupplyParser(),
        NodeResourcesParser(),
        GpuLimitParser(),
        LinkStateParser(),
        NvlinkStatusParser(),
        GpuProcessParser(),
        CqeDumpParser(),
        RayStatusParser(),
    ]


@functools.cache
def _gate(triggers: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """One search for any trigger; built once per set of parsers (every scanned file, and a
    service scans thousands, has the same set)."""
    ordered = sorted(set(triggers), key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in ordered)).search


class StructuredScan:
    """Runs every block parser over one file's lines (message bodies, prefixes removed)."""

    __slots__ = ("_gate", "_live", "_parsers", "live")

    def __init__(self, parsers: list[BlockParser] | None = None) -> None:
        self._parsers = _parsers() if parsers is None else parsers
        self._gate = _gate(tuple(t for p in self._parsers for t in p.triggers))
        self._live: list[BlockParser] = []  # parsers inside a block after the last line
        self.live = False  # some parser is inside a block: every line goes to it

    def wants(self, text: str) -> bool:
        """Whether a line holds a trigger of some parser (depends on no digit: memoisable)."""
        return self._gate(text) is not None

    def feed(self, line_no: int, text: str, gated: bool) -> list[Finding]:
        """Findings for one line (``text`` with its prefixes; parsers see the message);
        ``gated``: what ``wants`` says of it."""
        if not gated and not self._live:
            return []
        body = text[parse_prefix(text).body_start :]
        found: list[Finding] = []
        for parser in self._parsers if gated else self._live:
            if not parser.active and not any(t in body for t in parser.triggers):
                continue
            finding = parser.feed(line_no, body)
            if finding is not None:
                found.append(finding)
        self._live = [p for p in self._parsers if p.active]
        self.live = bool(self._live)
        return found
