"""A live writer process rotating its log while JobLogSource polls: no line lost or doubled."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainmedic.core.observations import Progress
from trainmedic.sources.joblog import JobLogSource

pytestmark = pytest.mark.slow

WRITER = r"""
import os, sys, time
path = sys.argv[1]
def open_log():
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
fd = open_log()
for i in range(1, 1501):
    line = (f"2026-11-29T08:50:01.123Z [rank{i % 4}] node=node1 iter={i} loss=0.5 "
            f"step_s=0.01 compute_s=0.006 wait_s=0.004 samples_per_s=100.0\n").encode()
    if i % 7 == 0:  # a line written in two pieces: the reader must hold the first half
        os.write(fd, line[:30]); time.sleep(0.0005); os.write(fd, line[30:])
    else:
        os.write(fd, line)
    if i == 700:  # logrotate-style: rename, then a new file at the same path
        os.rename(path, path + ".1"); os.close(fd); fd = open_log()
    if i % 100 == 0:
        time.sleep(0.01)
os.close(fd)
"""


def test_rotation_during_live_writes_loses_nothing(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    source = JobLogSource("j1", [log])
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log)])
    seen: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = writer.poll() is not None
            seen += [o.iteration for o in source.poll() if isinstance(o, Progress)]
            if done:
                seen += [o.iteration for o in source.poll() if isinstance(o, Progress)]
                break
            time.sleep(0.002)
    finally:
        writer.kill()
        writer.wait()
        source.close()
    assert writer.returncode == 0
    assert sorted(seen) == list(range(1, 1501)), "every iteration exactly once"
