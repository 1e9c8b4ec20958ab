"""``analyze`` cuts a file into the lines the live follower reads from it (live = offline).

Seen on the lab cluster: Lightning's bar (``\\r`` redraws, no newline for minutes) made the
job's stdout one line of 74 KB; a rank's Xid line printed into it landed at its end, was read
live (a line per redraw) and dropped offline (a line cut at 64 KiB), and the verdicts
differed (live ``nvrm.xid``, offline the SIGKILL guess).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from trainmedic.offline import lines as offline_lines
from trainmedic.offline.analyze import analyze_path
from trainmedic.offline.lines import TRUNCATED_MARK, read_lines
from trainmedic.sources import follower as live_follower
from trainmedic.sources.follower import LogFollower

BAR = "Epoch 4:   2%|▏         | {n}/200 [00:00<00:14, 13.47it/s, v_num=2, train_loss=0.07]"
CASES = [
    b"plain\nlines\n",
    b"no newline at the end",
    b"  0%| | 0/90\r  1%| | 1/90\r" + b" " * 40 + b"\r  2%| | 2/90\r\nTraceback\r\n  File x\n",
    b"\n\nblank lines stay\n\r\rerased bars do not\n",
    b"bad \xff\xfe bytes\r" + b"x" * 500 + b"\rnext\n" + b"y" * 300,
    b"one\r",
    b"z" * 250 + b"\nshort\n" + b"w" * 100 + b"\n" + b"v" * 101,  # cut lines, no bar
    b"\r\n\r\n",
]


def live(data: bytes, tmp_path: Path, max_bytes: int) -> list[str]:
    log = tmp_path / "job.out"
    log.write_bytes(data)
    return [line.text for line in LogFollower(log, max_line_bytes=max_bytes).poll()]


def offline(data: bytes, max_bytes: int) -> list[str]:
    return [raw.decode("utf-8", "replace") for raw in read_lines(io.BytesIO(data), max_bytes)]


@pytest.mark.parametrize("data", CASES)
@pytest.mark.parametrize("block", [1, 3, 7, 1 << 20])
def test_offline_lines_are_the_lines_the_follower_reads(
    data: bytes, block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offline_lines, "BLOCK_BYTES", block)  # \r\n split between two reads
    # The follower holds a last line without an end until it comes; a finished file read
    # offline has that line too: what the follower reads once its newline is there.
    ended = data if data.endswith((b"\n", b"\r")) else data + b"\n"
    assert offline(data, 100) == live(ended, tmp_path, 100)


def test_the_truncation_mark_is_the_followers() -> None:
    assert TRUNCATED_MARK.decode() == live_follower.TRUNCATED_MARK


def test_an_xid_printed_at_the_end_of_a_long_bar_line_is_read_offline(tmp_path: Path) -> None:
    """The lab's xid_stdout scenario: 74 KB of redraws, then the forged Xid glued to the last
    one (another process wrote it mid-draw), then the crash. Offline, as live: ``nvrm.xid``."""
    bars = "".join("\r" + BAR.format(n=n % 200) for n in range(1000)).encode()
    xid = b"NVRM: Xid (PCI:0000:3b:00): 79, pid=30048, GPU has fallen off the bus\n"
    (tmp_path / "job.out").write_bytes(bars[:-30] + xid)
    result = analyze_path(tmp_path)
    root = result.verdict.root_cause
    assert root is not None and root.signature == "nvrm.xid", result.verdict
    assert result.verdict.category.value == "gpu_hardware"
