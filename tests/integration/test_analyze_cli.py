"""The real ``trainmedic analyze`` / ``eval`` commands, run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "logs"
CORPUS_CANDIDATES = (Path("/work/shared/corpus/dev"), REPO.parent / "shared" / "corpus" / "dev")
CORPUS = next((p for p in CORPUS_CANDIDATES if (p / "labels.jsonl").is_file()), None)

pytestmark = pytest.mark.slow


def trainmedic(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainmedic.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def test_readme_example_is_gpu_hardware() -> None:
    proc = trainmedic("analyze", "--json", "examples/logs/xid79.log")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["category"] == "gpu_hardware" and data["failure"]
    assert data["implicated"]["nodes"] == ["gpu-node-07"]
    assert data["advice"]["action"] == "restart_excluding"
    human = trainmedic("analyze", "examples/logs/xid79.log")
    assert human.returncode == 0 and "gpu_hardware" in human.stdout and ">>" in human.stdout


def test_example_job_dirs() -> None:
    proc = trainmedic(
        "analyze",
        "--json",
        str(EXAMPLES / "xid79"),
        str(EXAMPLES / "nccl_timeout"),
        str(EXAMPLES / "app_traceback.log"),
    )
    assert proc.returncode == 0, proc.stderr
    xid, timeout, app = (json.loads(line) for line in proc.stdout.splitlines())
    assert xid["category"] == "gpu_hardware"
    assert xid["advice"]["drain_nodes"] == ["gpu-node-07"]
    assert timeout["implicated"]["ranks"] == [3]  # not torchrun's Root Cause rank 0
    assert "node-b" in timeout["implicated"]["nodes"]
    assert app["category"] == "application" and app["advice"]["action"] == "stop"


def test_unreadable_input_exit_2_others_still_printed(tmp_path: Path) -> None:
    missing = tmp_path / "missing.log"
    proc = trainmedic("analyze", "--json", str(missing), "examples/logs/app_traceback.log")
    assert proc.returncode == 2
    assert str(missing) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
    assert len(proc.stdout.splitlines()) == 1
    assert json.loads(proc.stdout)["category"] == "application"


def test_peak_memory_stays_small_on_a_large_log(tmp_path: Path) -> None:
    """A ~60 MB log analysed in a child process: peak RSS stays far below the file's size plus
    the interpreter (a non-streaming reader would hold the whole file; the 2 GB budget is
    200 MB)."""
    path = tmp_path / "big.log"
    line = b"node=n1 iter=1 loss=0.5 step_s=0.01 compute_s=0.008 wait_s=0.001 samples_per_s=99.0\n"
    chunk = line * 10_000
    with path.open("wb") as f:
        for _ in range(70):
            f.write(chunk)
        f.write(b"RuntimeError: CUDA error: an illegal memory access was encountered\n")
    # VmHWM is this process's own peak (a new address space at exec); ru_maxrss is not: Linux
    # carries it across exec from the forking parent, so a big pytest process inflated it.
    code = (
        "import sys\n"
        "from trainmedic.offline.analyze import analyze_path\n"
        "r = analyze_path(sys.argv[1])\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(r.verdict.category, hwm.split()[1])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    category, peak_kib = proc.stdout.split()
    assert category == "application"
    assert int(peak_kib) < 100 * 1024


@pytest.mark.skipif(CORPUS is None, reason="no labelled corpus at ../shared/corpus/dev")
def test_eval_on_dev_corpus() -> None:
    assert CORPUS is not None
    proc = trainmedic("eval", "--json", str(CORPUS))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    hit, total = data["category_accuracy_high_medium"]
    assert total > 0 and hit / total >= 0.8
    human = trainmedic("analyze", str(CORPUS))
    assert human.returncode == 0, human.stderr
