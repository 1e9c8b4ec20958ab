"""What attribution may know besides matched events: the job's shape and progress.

All optional: the live engine may pass only events; ``analyze`` fills in what it saw in the
files (the layers that rest on these facts stay silent without them). Kept as plain values so
attribution stays a pure function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainmedic.core.logparse.collective import CollectiveTrace
from trainmedic.core.logparse.elastic import ChildFailure
from trainmedic.core.logparse.evidence import EvidenceLine
from trainmedic.core.logparse.stackdump import StackDump
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Event


@dataclass(frozen=True, slots=True)
class JobFacts:
    progress: ProgressSummary | None = None
    child_failures: tuple[ChildFailure, ...] = ()
    ranks_seen: frozenset[int] = frozenset()
    # Text around each event (its neighbours and, for a traceback's exception line, the frames):
    # context rules read it to tell a checkpoint write from an NCCL shm segment.
    neighbours: Mapping[Event, str] = field(default_factory=dict)
    # Progress lines the same file printed after each event (absent: unknown).
    progress_after: Mapping[Event, int] = field(default_factory=dict)
    # Failure lines no signature matched (the general evidence layer reads them) and how many
    # there were in all (only the first and last few are kept).
    evidence: tuple[EvidenceLine, ...] = ()
    evidence_count: int = 0
    # Per file: progress points, running reports, the end of training (time structure).
    timelines: tuple[Timeline, ...] = ()
    # What the ranks said about their collectives (NCCL trace, frames, analyser notes).
    collectives: CollectiveTrace | None = None
    # Thread stack dumps (faulthandler, py-spy): where a process waited when someone looked.
    stack_dumps: tuple[StackDump, ...] = ()
    # A bounded sample of the input's lines (head and tail of each file): the mechanisms that
    # read whole lines (``version_ab.py``, ``net_plugin.py``) and the learned evidence layer
    # (``learned.py``) read it; empty, they stay silent.
    text: tuple[str, ...] = ()
    # Whether the learned layer may read ``text`` (off: ``analyze_path(learned=False)``,
    # crossval's rules alone, which still run the line mechanisms).
    learned: bool = True
    # Nodes whose kernel log was read for the job (even empty): the kernel logs every kill its
    # OOM killer makes, so no OOM record there rules the OOM killer out for that node.
    kernel_logs: frozenset[str] = frozenset()
