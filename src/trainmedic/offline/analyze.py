"""Offline analysis of one job's logs: a file, or a directory holding per-rank files, a kernel
log and the batch output. The imperative shell around the pure core.

Files are streamed in binary and never held whole: each line is decoded with replacement,
stripped of NULs and cut to ``MAX_LINE_BYTES`` before matching, and only matched events (capped)
with a few neighbour lines are kept, so a 2 GB log needs about as much memory as a small one.
Prefixes are parsed only on lines that matched (or sit inside a traceback); progress lines are
spotted by substring and parsed lazily; the per-line cost outside matches is a handful of
substring tests plus the matcher's own prefilter.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, cast

from trainmedic.core.attribute.facts import JobFacts
from trainmedic.core.attribute.verdict import attribute
from trainmedic.core.errors import InputError
from trainmedic.core.logparse.collective import CollectiveTrace
from trainmedic.core.logparse.elastic import ChildFailure
from trainmedic.core.logparse.evidence import EvidenceLine
from trainmedic.core.logparse.prefix import REFERENCE_YEAR, parse_prefix
from trainmedic.core.logparse.scan import FileScan, ScanLimits, scan_lines
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.model import Advice, Event, Verdict
from trainmedic.core.policy.context import PolicyContext
from trainmedic.core.policy.decide import decide

MAX_FILES = 512
_SKIP_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".npy", ".npz", ".so", ".zip")


@dataclass(frozen=True, slots=True)
class AnalysisResult:
    source: str
    verdict: Verdict
    advice: Advice
    files: tuple[str, ...]
    lines: int
    progress: ProgressSummary
    # (line number, text) around each kept event, for the report
    windows: dict[Event, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()  # files in a directory that could not be read (and why)


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        # GzipFile is a BufferedIOBase: it reads like IO[bytes] but is not typed as one.
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def _job_files(root: Path) -> list[Path]:
    """Regular files under a job directory, in name order (hidden files and binaries skipped)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name.endswith(_SKIP_SUFFIXES):
                continue
            found.append(Path(dirpath) / name)
            if len(found) >= MAX_FILES:
                return found
    return found


def _scan_file(path: Path, root: Path, limits: ScanLimits) -> FileScan:
    display = str(path)
    node_hint = path.parent.name if path.parent != root and root.is_dir() else None
    try:
        with _open(path) as handle:
            return scan_lines(_raw_lines(handle, limits.max_line_bytes), display, node_hint, limits)
    except (OSError, EOFError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"{path}: cannot read: {reason}") from exc


def _raw_lines(handle: IO[bytes], max_bytes: int) -> Iterator[bytes]:
    """Lines of at most ``max_bytes``: the rest of a longer line is read and dropped in chunks."""
    readline = handle.readline
    while True:
        chunk = readline(max_bytes)
        if not chunk:
            return
        if len(chunk) == max_bytes and not chunk.endswith(b"\n"):
            while True:  # discard the rest of an over-long line without keeping it
                rest = readline(max_bytes)
                if not rest or rest.endswith(b"\n"):
                    break
        yield chunk


def analyze_path(path: str | Path, limits: ScanLimits | None = None) -> AnalysisResult:
    """Analyse one input; raises ``InputError`` when nothing in it can be read."""
    limits = limits or ScanLimits()
    root = Path(path)
    try:
        is_dir = root.is_dir()
        if not is_dir and not root.is_file():
            raise InputError(f"{root}: no such file or directory")
    except OSError as exc:
        raise InputError(f"{root}: cannot read: {exc.strerror or exc}") from exc
    files = _job_files(root) if is_dir else [root]
    scans: list[FileScan] = []
    skipped: list[str] = []
    for file in files:
        try:
            scans.append(_scan_file(file, root, limits))
        except InputError as exc:
            if not is_dir:
                raise
            skipped.append(str(exc))
    if is_dir and not scans:
        detail = f" ({skipped[0]})" if skipped else ""
        raise InputError(f"{root}: directory holds no readable log file{detail}")
    return _combine(str(root), scans, tuple(skipped))


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


def _combine(source: str, scans: list[FileScan], skipped: tuple[str, ...]) -> AnalysisResult:
    scans = _same_year(scans)
    events: list[Event] = []
    neighbours: dict[Event, str] = {}
    progress_after: dict[Event, int] = {}
    windows: dict[Event, tuple[tuple[int, str], ...]] = {}
    ranks: set[int] = set()
    failures: list[ChildFailure] = []
    evidence: list[EvidenceLine] = []
    for scan in scans:
        events.extend(scan.events)
        neighbours.update(scan.neighbours)
        progress_after.update(scan.progress_after)
        windows.update(scan.windows)
        ranks.update(scan.ranks_seen)
        failures.extend(scan.child_failures)
        evidence.extend(scan.evidence)
    progress = _merge_progress([s.progress for s in scans])
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
    )
    verdict = attribute(events, facts=facts)
    return AnalysisResult(
        source=source,
        verdict=verdict,
        advice=decide(verdict, PolicyContext.offline(str(source))),
        files=tuple(s.path for s in scans),
        lines=sum(s.lines for s in scans),
        progress=progress,
        windows=windows,
        skipped=skipped,
    )


def _merge_progress(parts: list[ProgressSummary]) -> ProgressSummary:
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
        nccl_setup_seen=any(p.nccl_setup_seen for p in parts),
        nccl_setup_before_warning=any(p.nccl_setup_before_warning for p in parts),
        meaningful_after_nccl=max(
            (p.meaningful_after_nccl for p in parts if p.nccl_setup_seen), default=0
        ),
    )
