"""The example trainer's log: one line per rank per event, each written with ONE ``os.write``.

``print`` from several ranks sharing one stdout splices lines; a single ``write`` of a whole
line (shorter than PIPE_BUF, or to an O_APPEND file) lands intact. Every line starts with

    2026-11-29T08:50:01.123Z [rank1] node=node2 <text>

and a progress line's text is exactly

    iter=120 loss=0.53210 step_s=0.01230 compute_s=0.00810 wait_s=0.00420 samples_per_s=2601.3

(the format the progress parser of ``trainmedic.core.logparse`` reads). The same step can also be
appended as JSONL to ``<run_dir>/progress/<node>-rank<r>.jsonl`` (the JSONL progress protocol).
"""

from __future__ import annotations

import json
import math
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.timestamps import iso_ms


@dataclass(frozen=True, slots=True)
class StepReport:
    """What one rank measured for one training step."""

    iteration: int
    loss: float
    step_s: float  # wall time of the whole step, previous step's end to this one's
    compute_s: float  # forward + backward on this rank
    wait_s: float  # blocked in the gradient allreduce
    samples_per_s: float  # this rank's samples / step_s


def format_progress(step: StepReport) -> str:
    """The progress text after the line prefix (no timestamp, no newline)."""
    return (
        f"iter={step.iteration} loss={step.loss:.5f} step_s={step.step_s:.5f} "
        f"compute_s={step.compute_s:.5f} wait_s={step.wait_s:.5f} "
        f"samples_per_s={step.samples_per_s:.1f}"
    )


def progress_record(step: StepReport, rank: int, node: str, unix_time: float) -> str:
    """One JSONL progress-protocol line (non-finite loss becomes null: JSON has no NaN)."""
    record = {
        "time": round(unix_time, 6),
        "rank": rank,
        "node": node,
        "iteration": step.iteration,
        "loss": step.loss if math.isfinite(step.loss) else None,
        "step_time": round(step.step_s, 6),
        "compute_time": round(step.compute_s, 6),
        "wait_time": round(step.wait_s, 6),
        "samples_per_s": round(step.samples_per_s, 3),
    }
    return json.dumps(record, separators=(",", ":")) + "\n"


class RankLog:
    """Writes this rank's lines to ``fd`` (stdout by default), one ``os.write`` per event."""

    def __init__(self, rank: int, node: str, fd: int = 1, jsonl_dir: Path | None = None) -> None:
        self.rank = rank
        self.node = node
        self._fd = fd
        self._prefix = f" [rank{rank}] node={node} "
        self._jsonl_fd: int | None = None
        if jsonl_dir is not None:
            jsonl_dir.mkdir(parents=True, exist_ok=True)
            path = jsonl_dir / f"{node}-rank{rank}.jsonl"
            self._jsonl_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, text: str) -> None:
        """Log ``text``; a multi-line text gets the prefix on every line, still one write."""
        head = iso_ms(time.time()) + self._prefix
        body = "".join(head + part + "\n" for part in text.rstrip("\n").split("\n"))
        self._write(self._fd, body)

    def progress(self, step: StepReport) -> None:
        now = time.time()
        self._write(self._fd, iso_ms(now) + self._prefix + format_progress(step) + "\n")
        if self._jsonl_fd is not None:
            self._write(self._jsonl_fd, progress_record(step, self.rank, self.node, now))

    def exception(self, exc: BaseException) -> None:
        """Log a traceback the way Python prints it, each line prefixed with this rank."""
        self.line("".join(traceback.format_exception(exc)))

    def close(self) -> None:
        if self._jsonl_fd is not None:
            os.close(self._jsonl_fd)
            self._jsonl_fd = None

    @staticmethod
    def _write(fd: int, text: str) -> None:
        data = text.encode()
        # A short write to a pipe or file is rare; finish it rather than lose the tail.
        while data:
            written = os.write(fd, data)
            data = data[written:]
