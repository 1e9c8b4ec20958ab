"""One job's evidence from the scans of its files: what attribution is given, live and offline.

``trainmedic analyze`` scans the files it is given; the live engine scans the lines each job
log grows by with the same ``LineScanner``. Both hand the scans to ``combine_scans`` and
attribute its events with its facts, so the same lines give the same verdict wherever they
are read.

Across files, a file's attempt boundary (a restart line with a timestamp) also bounds the
files that have none: an event stamped clearly before the latest attempt started (a kernel
log's Xid of the node the previous attempt died on) is not evidence against the current one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from trainmedic.core.attribute.facts import JobFacts
from trainmedic.core.logparse.collective import CollectiveTrace
from trainmedic.core.logparse.elastic import ChildFailure
from trainmedic.core.logparse.evidence import EvidenceLine
from trainmedic.core.logparse.prefix import REFERENCE_YEAR, parse_prefix
from trainmedic.core.logparse.scan import FileScan
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.model import Event

ATTEMPT_LOOKBACK_S = 10.0
"""An event this long before the latest attempt's restart line may still be that attempt's
(the node a job lands on failing just before its ranks announce themselves): the live
engine's node-evidence lookback, for the same reason."""


@dataclass(frozen=True, slots=True)
class JobEvidence:
    events: tuple[Event, ...]
    facts: JobFacts
    progress: ProgressSummary
    # (line number, text) around each kept event, for the report
    windows: dict[Event, tuple[tuple[int, str], ...]] = field(default_factory=dict)


def combine_scans(scans: Sequence[FileScan], since: float | None = None) -> JobEvidence:
    """The events of every file (in the order given) and the job's facts. ``since``: when the
    attempt to judge started, if known (``analyze --since``): a node's kernel log is scoped
    to it as the live service scopes it (its older lines are other jobs' and attempts')."""
    scans = _same_year(list(scans))
    started = [s.attempt_started for s in scans if s.attempt_started is not None]
    cutoff = max(started) - ATTEMPT_LOOKBACK_S if started else None
    node_cutoff = since - ATTEMPT_LOOKBACK_S if since is not None else None
    events: list[Event] = []
    neighbours: dict[Event, str] = {}
    progress_after: dict[Event, int] = {}
    windows: dict[Event, tuple[tuple[int, str], ...]] = {}
    ranks: set[int] = set()
    failures: list[ChildFailure] = []
    evidence: list[EvidenceLine] = []
    for scan in scans:
        kept = [
            e for e in scan.events if cutoff is None or e.timestamp is None or e.timestamp >= cutoff
        ]
        if scan.kernel_log_of and node_cutoff is not None:
            kept = [e for e in kept if e.timestamp is None or e.timestamp >= node_cutoff]
        events.extend(kept)
        for event in kept:
            if event in scan.neighbours:
                neighbours[event] = scan.neighbours[event]
            if event in scan.windows:
                windows[event] = scan.windows[event]
            if event in scan.progress_after:
                progress_after[event] = scan.progress_after[event]
        ranks.update(scan.ranks_seen)
        failures.extend(scan.child_failures)
        evidence.extend(scan.evidence)
    progress = merge_progress([s.progress for s in scans])
    facts = JobFacts(
        progress=progress,
        child_failures=tuple(failures),
        ranks_seen=frozenset(ranks),
        neighbours=neighbours,
        progress_after=progress_after,
        evidence=tuple(evidence),
        evidence_count=sum(s.evidence_count for s in scans),
        timelines=tuple(s.timeline for s in scans),
        collectives=CollectiveTrace(
            nccl_ops=tuple(op for s in scans for op in s.collectives.nccl_ops),
            frame_ops=tuple(f for s in scans for f in s.collectives.frame_ops),
            notes=tuple(n for s in scans for n in s.collectives.notes),
        ),
        stack_dumps=tuple(d for s in scans for d in s.stack_dumps),
        kernel_logs=frozenset(s.kernel_log_of for s in scans if s.kernel_log_of),
    )
    return JobEvidence(tuple(events), facts, progress, windows)


def _same_year(scans: list[FileScan]) -> list[FileScan]:
    """Put year-less stamps (syslog, glog) of every file in the job's year.

    A kernel log (``Mar  7 04:58:42``) beside rank logs dated ``2026-03-07`` must not read
    as two years older than them: its events are re-stamped in the year the others show.
    """
    year = next((s.year for s in scans if s.year is not None), None)
    if year is None or year == REFERENCE_YEAR:
        return scans
    fixed = []
    for scan in scans:
        if scan.year is not None or not any(e.timestamp is not None for e in scan.events):
            fixed.append(scan)
            continue
        moved = {
            e: replace(e, timestamp=parse_prefix(e.text, year).timestamp)
            if e.timestamp is not None
            else e
            for e in scan.events
        }
        fixed.append(
            replace(
                scan,
                events=tuple(moved[e] for e in scan.events),
                neighbours={moved[e]: v for e, v in scan.neighbours.items()},
                windows={moved[e]: v for e, v in scan.windows.items()},
                progress_after={moved[e]: v for e, v in scan.progress_after.items()},
                year=year,
            )
        )
    return fixed


def merge_progress(parts: Sequence[ProgressSummary]) -> ProgressSummary:
    """One summary for the job: the furthest file decides, reports add up."""
    if not parts:
        return ProgressSummary()
    best = max(parts, key=lambda p: (p.reports > 0, p.last_iteration or -1, p.reports))
    init_lines = [p for p in parts if p.init_complete_line is not None]
    checkpoints = [p.last_checkpoint for p in parts if p.last_checkpoint is not None]
    return ProgressSummary(
        reports=sum(p.reports for p in parts),
        first_iteration=best.first_iteration,
        last_iteration=best.last_iteration,
        last_label=best.last_label,
        last_elapsed_s=best.last_elapsed_s,
        last_step_time=best.last_step_time,
        last_checkpoint=max(checkpoints) if checkpoints else None,
        nonfinite_at=best.nonfinite_at,
        init_complete_line=init_lines[0].init_complete_line if init_lines else None,
        meaningful_after_init=max((p.meaningful_after_init for p in init_lines), default=0),
        only_nccl_lines=all(p.only_nccl_lines for p in parts),
        nccl_setup_seen=any(p.nccl_setup_seen for p in parts),
        nccl_setup_before_warning=any(p.nccl_setup_before_warning for p in parts),
        # clean only when every file that set NCCL up connected with no trouble
        nccl_net_connected_clean=any(p.nccl_net_connected_clean for p in parts)
        and all(p.nccl_net_connected_clean for p in parts if p.nccl_setup_seen),
        meaningful_after_nccl=max(
            (p.meaningful_after_nccl for p in parts if p.nccl_setup_seen), default=0
        ),
    )
