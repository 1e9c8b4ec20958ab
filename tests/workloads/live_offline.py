"""The check every end-to-end scenario ends with: the live verdict equals ``analyze``'s.

``compare_with_analyze`` gathers the files the service read for one job as an operator would
hand them to ``trainmedic analyze`` (the job's logs, e.g. its output and error files, and the
kernel log of each node the attempt ran on, in a ``<node>/`` directory, empty or not: the
service followed it, with ``--since`` the attempt's start: the live engine reads a node's
kernel log from then on), runs the real CLI on
them, and sets its verdict beside the incident the service stored for the job's last attempt
in those files (``analyze`` judges a log that spans attempts on its last one).

What the live service may know that files cannot say is left out of the comparison: a
verdict resting on the scheduler's word (a node the scheduler marked DOWN), and a node's
kernel line another job's incident already holds (one Xid explains one incident: the live
engine does not charge it to a job that landed on the node seconds later, within the
lookback that ``--since`` allows; ``analyze`` of the files alone cannot know it was used, so
such lines are left out of the node's log handed to it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmedic.core.model import EvidenceSource
from trainmedic.store import IncidentRecord, Store


@dataclass(frozen=True)
class Comparison:
    incident: IncidentRecord
    offline: dict[str, Any]  # analyze --json

    @property
    def live(self) -> tuple[str, str | None]:
        root = self.incident.root_cause
        return self.incident.category.value, root.signature if root else None

    @property
    def analyzed(self) -> tuple[str, str | None]:
        root = self.offline.get("root_cause") or {}
        return str(self.offline["category"]), root.get("signature")

    @property
    def same(self) -> bool:
        return self.live == self.analyzed

    def __str__(self) -> str:
        return f"live {self.live} vs analyze {self.analyzed} (incident {self.incident.id})"


def analyze_files(
    files: Sequence[Path],
    kernel_logs: Mapping[str, Path],
    since: float | None = None,
    used: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """``trainmedic analyze --json`` over copies of ``files`` and ``<node>/kern.log``
    (``since``: the attempt's start, ``--since``: the kernel logs scoped to it; ``used``:
    kernel lines other jobs' incidents hold, left out)."""
    with tempfile.TemporaryDirectory(prefix="tm-analyze-") as tmp:
        root = Path(tmp)
        for path in files:
            if path.exists():
                shutil.copy(path, root / path.name)
        for node, path in kernel_logs.items():
            if path.exists():  # read, even empty: no OOM record there is evidence too
                (root / node).mkdir()
                kept = [
                    line
                    for line in path.read_text(errors="replace").splitlines(keepends=True)
                    if line.strip() not in used
                ]
                (root / node / "kern.log").write_text("".join(kept))
        done = subprocess.run(
            [sys.executable, "-m", "trainmedic.cli.main", "analyze", str(root), "--json"]
            + ([] if since is None else ["--since", repr(since)]),
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ.copy(),
        )
        if not done.stdout.strip():
            raise AssertionError(f"trainmedic analyze failed: {done.stderr.strip()}")
        result: dict[str, Any] = json.loads(done.stdout)
        return result


def compare_with_analyze(
    store: Store,
    job_id: str,
    incident: IncidentRecord | None = None,
    *,
    kernel_logs: Mapping[str, Path] | None = None,
    files: Sequence[Path] | None = None,
) -> Comparison:
    """The job's latest crash/hang incident (or ``incident``) against ``analyze`` of the files
    the service read for the job (its spec's logs, or ``files``: copies of them as they stood
    at some moment, with the same names) and of the kernel logs of the nodes that incident's
    attempt ran on (``kernel_logs``: node -> path, default the spec's)."""
    job = store.get_job(job_id)
    assert job is not None, f"job {job_id} is not registered"
    if incident is None:
        found = [i for i in store.list_incidents(job_id) if i.kind.value != "straggler"]
        assert found, f"job {job_id} has no incident"
        incident = max(found, key=lambda i: (i.attempt, i.detected_at))
    attempt = next((a for a in store.list_attempts(job_id) if a.attempt == incident.attempt), None)
    nodes = attempt.nodes if attempt is not None else ()
    kernels = (
        kernel_logs
        if kernel_logs is not None
        else {n: Path(p) for n, p in job.spec.kernel_logs.items()}
    )
    if files is None:
        files = [Path(p) for p in job.spec.log_paths]
    # The attempt's start, as the service recorded it: the nodes' kernel logs count from
    # there, as the live engine reads them (their older lines are other jobs' and attempts').
    since = attempt.started_at if attempt is not None else None
    used = frozenset(
        event.text.strip()
        for other in store.list_incidents()
        if other.job_id != job_id
        for event in (*((other.root_cause,) if other.root_cause else ()), *other.evidence)
        if event.evidence is EvidenceSource.KERNEL_LOG
    )
    return Comparison(
        incident,
        analyze_files(files, {n: p for n, p in kernels.items() if n in nodes}, since, used),
    )
