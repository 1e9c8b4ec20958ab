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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, cast

from trainmedic.core.attribute.learned_text import LineSample
from trainmedic.core.attribute.smells import smells
from trainmedic.core.attribute.verdict import attribute
from trainmedic.core.engine.evidence import combine_scans
from trainmedic.core.errors import InputError
from trainmedic.core.logparse.scan import FileScan, ScanLimits, scan_lines
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.model import Advice, Event, Verdict
from trainmedic.core.policy.context import PolicyContext
from trainmedic.core.policy.decide import decide
from trainmedic.offline.lines import read_lines

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
    # configuration smells the input shows (``attribute/smells.py``): suspects, not causes
    suspects: tuple[Event, ...] = ()


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


def _scan_file(
    path: Path, root: Path, limits: ScanLimits, sample: LineSample | None = None
) -> FileScan:
    display = str(path)
    node_hint = path.parent.name if path.parent != root and root.is_dir() else None
    try:
        with _open(path) as handle:
            raw = read_lines(handle, limits.max_line_bytes)
            if sample is not None:
                raw = _sampled(raw, sample)
            return scan_lines(raw, display, node_hint, limits)
    except (OSError, EOFError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"{path}: cannot read: {reason}") from exc


def _sampled(lines: Iterable[bytes], sample: LineSample) -> Iterator[bytes]:
    for line in lines:
        sample.add(line)
        yield line


def analyze_path(
    path: str | Path,
    limits: ScanLimits | None = None,
    since: float | None = None,
    *,
    learned: bool = True,
) -> AnalysisResult:
    """Analyse one input; raises ``InputError`` when nothing in it can be read. ``since``: the
    judged attempt's start (epoch seconds), which scopes the nodes' kernel logs to it. Without
    ``learned``, the learned evidence layer is not consulted (the rule layers alone)."""
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
    text: list[str] = []
    for file in files:
        sample = LineSample()
        try:
            scans.append(_scan_file(file, root, limits, sample))
            text.extend(sample.lines()[: max(0, MAX_SAMPLE_LINES - len(text))])
        except InputError as exc:
            if not is_dir:
                raise
            skipped.append(str(exc))
    if is_dir and not scans:
        detail = f" ({skipped[0]})" if skipped else ""
        raise InputError(f"{root}: directory holds no readable log file{detail}")
    return _combine(str(root), scans, tuple(skipped), tuple(text), since, learned)


MAX_SAMPLE_LINES = 4000
"""Lines of all files together the learned evidence layer reads (``LineSample`` per file)."""


def _combine(
    source: str,
    scans: list[FileScan],
    skipped: tuple[str, ...],
    text: tuple[str, ...] = (),
    since: float | None = None,
    learned: bool = True,
) -> AnalysisResult:
    # The live engine combines and attributes its scans the same way (one verdict per lines).
    evidence = combine_scans(scans, since)
    facts = replace(evidence.facts, text=text, learned=learned)
    verdict = attribute(evidence.events, facts=facts)
    return AnalysisResult(
        source=source,
        verdict=verdict,
        advice=decide(verdict, PolicyContext.offline(str(source))),
        files=tuple(s.path for s in scans),
        lines=sum(s.lines for s in scans),
        progress=evidence.progress,
        windows=evidence.windows,
        skipped=skipped,
        suspects=smells(evidence.events),
    )
