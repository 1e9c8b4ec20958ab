"""Result tables: the rows a benchmark or a measuring tool prints once it runs.

nccl-tests / rccl-tests, OSU micro-benchmarks, perftest (``ib_write_bw``), iperf and many
others print a header row of column names, sometimes a row of units, then one row of numbers
per measurement. Two things follow for the evidence layer:

* a header row is not a failure line, even when one of its columns is named after a failure
  ("... busbw  error", "#wrong", "ExitCode"): it names what the rows will hold. nccl-tests
  marks it with "#", but a pasted copy often loses the mark;
* failure lines that a result table *followed* did not end the run: the tool went on to
  measure (a transport probe that failed on a device the run does not use, an optional
  library missing). Whatever ended the run is printed after its rows. A header with no row
  after it is no such proof.

A header row: four or more cells apart by two or more spaces (or tabs), each of one to three
words, no digit outside a bracketed unit ("(GB/s)", "[MB/sec]"), none of the punctuation of a
message (``: = , ; | " '`` ...), no failure state in capitals (a status row "FAILED  DOWN").
A result row: after a header, a row whose first cell is a number (or iperf's "[  5]") with at
least two numbers and no failure word.
"""

from __future__ import annotations

import re

# A line that can be a table's row at all (a function of its shape: no digit in the test, so
# the scan asks once per shape): no message punctuation, cells apart by 2+ spaces or a tab.
_TABLEISH = re.compile(r"^[^:=,;|\"'{}<>!?]*(?: {2}|\t)[^:=,;|\"'{}<>!?]*$")
_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_CELL_SPLIT = re.compile(r" {2,}|\t+")
_WORD = re.compile(
    r"^[#%]?[A-Za-z][\w./%+-]*(?:\([^()]*\)|\[[^\[\]]*\])?$|^[#%]?\[[^\]]*\]$|^\([^)]*\)$|^[#%]$"
)
_HEADER_LEAD = re.compile(r"^\[\s*ID\]\s*")  # iperf's stream column
_STATE_CELL = re.compile(
    r"\b(?:FAILED|FAIL|FAILURE|ERROR|CANCELLED|TIMEOUT|KILLED|DOWN|DRAIN\w*|FATAL|ABORTED"
    r"|PREEMPTED|NODE_FAIL|OUT_OF_MEMORY|DEAD|OOM|CRASHED|LOST)\b"
)
_NUMBER = re.compile(
    r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:-(?:\d+\.?\d*|\.\d+))?%?$|^N/A$"
)
_ROW_LEAD = re.compile(r"^\[\s*(?:\d+|SUM)\]\s*")  # iperf's "[  5]" / "[SUM]" stream column
_ROW_FAILURE = re.compile(
    r"(?i)rror|fail|fatal|abort|killed|timeout|timed out|refused|denied|cannot|unable|invalid"
)

MIN_HEADER_CELLS = 4
"""Cells a header row needs before its column names stop counting as failure words."""
MIN_TABLE_CELLS = 2
"""Cells a header row needs to open a result table ("# Size   Avg Latency(us)")."""


def may_be_table_row(text: str) -> bool:
    """The cheap test (digit-free, so it holds for every line of a shape)."""
    return _TABLEISH.match(text) is not None


def is_header_row(body: str, min_cells: int = MIN_HEADER_CELLS) -> bool:
    """A row of at least ``min_cells`` column names (see the module docstring)."""
    line = _HEADER_LEAD.sub("", body.strip().lstrip("#").strip(), count=1)
    if not line or _TABLEISH.match(line) is None:
        return False
    if any(ch.isdigit() for ch in _BRACKETED.sub("", line)):
        return False
    if _STATE_CELL.search(line):
        return False
    cells = _CELL_SPLIT.split(line)
    if len(cells) < min_cells:
        return False
    for cell in cells:
        words = cell.split()
        if not 1 <= len(words) <= 3 or not all(_WORD.match(w) for w in words):
            return False
    return True


def is_result_row(body: str) -> bool:
    """A row of a result table's numbers (taken as one only after a header)."""
    line = _ROW_LEAD.sub("", body.strip(), count=1)
    if not line or _ROW_FAILURE.search(line):
        return False
    cells = line.split()
    if len(cells) < 2 or _NUMBER.match(cells[0]) is None:
        return False
    return sum(1 for c in cells if _NUMBER.match(c)) >= 2


class ResultTableTracker:
    """Counts the result rows of the tables a file printed (a row counts once a header row
    was seen before it)."""

    __slots__ = ("_header_seen", "rows")

    def __init__(self) -> None:
        self._header_seen = False
        self.rows = 0

    def feed(self, body: str) -> None:
        """A line ``may_be_table_row`` accepted (its message, prefix removed)."""
        if is_header_row(body, MIN_TABLE_CELLS):
            self._header_seen = True
        elif self._header_seen and is_result_row(body):
            self.rows += 1
