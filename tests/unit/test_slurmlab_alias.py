"""``python -m trainmedic.slurmlab`` (the name the Slurm user docs give) is the lab's CLI."""

from __future__ import annotations

import os
import subprocess
import sys


def test_slurmlab_runs_the_lab_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainmedic.slurmlab", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "{up,down,status}" in done.stdout and "--dir" in done.stdout
