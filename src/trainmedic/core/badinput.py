"""Bad input that was refused or skipped: one record, line or file, never the whole loop.

Every parser and source that meets input it will not take (a malformed job in ``squeue
--json``, a hostile comment, a number too large to be an iteration, a FIFO given as a log
path, ...) skips that one record, counts it here under a ``BadInput`` kind and goes on. The
service's ``/metrics`` exposes the counts as ``trainmedic_bad_input_total{kind}``.

The tally is process-wide (the parsers are functions called from many places, and threading
a counter through each would change every signature); it holds counts only, no I/O, and is
safe to use from several threads.
"""

from __future__ import annotations

import threading
from collections import Counter
from enum import StrEnum

MAX_INT_DIGITS = 18
"""Digits of the largest number taken from text as an integer (an iteration, a rank, a job
id): 18 digits always fit a signed 64-bit column, and Python refuses ``int()`` of more than
4300 digits with ValueError, so a longer run of digits is refused before it gets there."""


class BadInput(StrEnum):
    """What was refused (the ``kind`` label of ``trainmedic_bad_input_total``)."""

    SLURM_JOB = "slurm_job"  # a job record of squeue --json that does not parse
    SLURM_NODE = "slurm_node"  # a node record of sinfo --json that does not parse
    SLURM_OUTPUT = "slurm_output"  # a whole Slurm answer refused (not JSON, too deep)
    SCONTROL_RECORD = "scontrol_record"  # an ambiguous or oversized scontrol -o record
    HOSTLIST = "hostlist"  # a hostlist expression too large or malformed
    JOB_COMMENT = "job_comment"  # a job comment over the size or nesting limits
    NUMBER = "number"  # a number in a log line too large to be an iteration, rank, ...
    LONG_LINE = "long_line"  # a log line cut at the line-length limit
    NOT_REGULAR_FILE = "not_regular_file"  # a FIFO, device, socket or symlink as a log path
    CHECKPOINT_MARKER = "checkpoint_marker"  # a checkpoint sidecar that is not a small file
    API_BODY = "api_body"  # a request body over the size limit


class BadInputTally:
    """Counts of bad input by kind since the process started (or since ``reset``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[BadInput] = Counter()

    def count(self, kind: BadInput, n: int = 1) -> None:
        with self._lock:
            self._counts[kind] += n

    def snapshot(self) -> dict[BadInput, int]:
        """Every kind with its count (0 for kinds not seen), in declaration order."""
        with self._lock:
            return {kind: self._counts[kind] for kind in BadInput}

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


BAD_INPUT = BadInputTally()
"""The process-wide tally that parsers, sources and the API count into."""


def small_int(digits: str) -> int | None:
    """``int(digits)`` for an optionally signed run of at most ``MAX_INT_DIGITS`` digits;
    None (counted as bad input) for a longer one."""
    if len(digits.lstrip("+-")) > MAX_INT_DIGITS:
        BAD_INPUT.count(BadInput.NUMBER)
        return None
    return int(digits)
