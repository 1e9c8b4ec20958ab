"""The example trainer under real torchrun + gloo on CPU: two "nodes" on this machine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from trainmedic.schedulers.local.launch import free_port, pid_alive, torchrun_argv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PROGRESS = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[rank(\d+)\] node=(node\d) iter=(\d+) "
    r"loss=(\S+) step_s=(\d+\.\d{5}) compute_s=(\d+\.\d{5}) wait_s=(\d+\.\d{5}) "
    r"samples_per_s=(\d+\.\d)$"
)


def run_job(
    run_dir: Path,
    *,
    nnodes: int = 2,
    nproc: int = 2,
    iters: int = 60,
    extra: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    attempt: int = 0,
    timeout: float = 150.0,
) -> tuple[list[int], str]:
    """Start one torchrun per node, wait for all; return exit codes and the joined output."""
    port = free_port()
    command = ["-m", "trainmedic.demo.trainer.cli", "--run-dir", str(run_dir)]
    command += ["--iters", str(iters), "--ckpt-every", "20", *extra]
    procs, outputs = [], []
    for rank in range(nnodes):
        node = f"node{rank + 1}"
        out = run_dir / f"{node}.attempt{attempt}.out"
        outputs.append(out)
        node_env = dict(os.environ, **(env or {}))
        node_env.update(
            TRAINMEDIC_NODE=node,
            TRAINMEDIC_ATTEMPT=str(attempt),
            TRAINMEDIC_KERNEL_LOG=str(run_dir / "nodes" / node / "kern.log"),
            OMP_NUM_THREADS="1",
        )
        argv = torchrun_argv(nnodes, rank, nproc, port, command, python=sys.executable)
        with open(out, "wb") as handle:
            procs.append(
                subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=node_env)
            )
    codes = []
    try:
        for proc in procs:
            codes.append(proc.wait(timeout=timeout))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return codes, "".join(o.read_text() for o in outputs)


def progress(text: str) -> list[tuple[int, str, int, float, float, float]]:
    """(rank, node, iteration, step_s, compute_s, wait_s) of every progress line."""
    rows = []
    for line in text.splitlines():
        if m := PROGRESS.match(line):
            rows.append((int(m[1]), m[2], int(m[3]), float(m[5]), float(m[6]), float(m[7])))
    return rows


def write_faults(run_dir: Path, *faults: dict[str, object]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "faults.json").write_text(json.dumps(list(faults)))


def test_two_nodes_complete_checkpoint_and_resume(tmp_path: Path) -> None:
    codes, out = run_job(tmp_path, iters=50, extra=("--progress-jsonl",))
    assert codes == [0, 0], out
    rows = progress(out)
    assert {(r, n) for r, n, *_ in rows} == {(0, "node1"), (1, "node1"), (2, "node2"), (3, "node2")}
    assert sorted({it for _, _, it, *_ in rows}) == list(range(1, 51))
    assert "trainer start attempt=0 node=node2 world_size=4" in out
    assert re.search(r"\[rank0\] node=node1 checkpoint begin iter=40\n", out)
    assert re.search(
        r"\[rank0\] node=node1 checkpoint saved iter=40 path=\S+ckpt_00000040\.pt", out
    )
    jsonl = (tmp_path / "progress" / "node2-rank3.jsonl").read_text().splitlines()
    assert json.loads(jsonl[-1])["iteration"] == 50
    assert set(json.loads(jsonl[0])) == {
        "time", "rank", "node", "iteration", "loss", "step_time", "compute_time",
        "wait_time", "samples_per_s",
    }  # fmt: skip

    codes, out = run_job(tmp_path, iters=70, attempt=1)
    assert codes == [0, 0], out
    assert "resumed from checkpoint iter=40" in out
    assert min(it for _, _, it, *_ in progress(out)) == 41


def test_sigkill_fails_fast_and_peers_see_connection_closed(tmp_path: Path) -> None:
    write_faults(
        tmp_path, {"id": "k1", "type": "sigkill", "node": "node2", "rank": 3, "at_iter": 15}
    )
    codes, out = run_job(tmp_path, iters=400)
    exited = time.time()
    assert all(code != 0 for code in codes), out
    assert re.search(r"Connection (closed|reset) by peer", out), out
    assert max(it for _, _, it, *_ in progress(out)) < 20
    fired = json.loads((tmp_path / "faults.fired" / "k1").read_text())
    assert (fired["node"], fired["rank"], fired["iteration"]) == ("node2", 3, 15)
    # Both torchruns end soon after the kill (about 1 s on an idle machine; the bound is
    # loose because CI machines are shared).
    assert exited - fired["time"] < 15


def test_xid79_writes_that_nodes_kernel_log_and_dies(tmp_path: Path) -> None:
    write_faults(tmp_path, {"id": "x1", "type": "xid79", "node": "node2", "at_iter": 10})
    codes, out = run_job(tmp_path, nproc=1, iters=400)
    assert all(code != 0 for code in codes)
    kern = (tmp_path / "nodes" / "node2" / "kern.log").read_text()
    assert re.match(
        r"^\S+\+00:00 node2 kernel: NVRM: Xid \(PCI:0000:3b:00\): 79, pid=\d+, name=python, "
        r"GPU has fallen off the bus\.$",
        kern.splitlines()[0],
    ), kern
    assert not (tmp_path / "nodes" / "node1" / "kern.log").exists()
    assert "Xid" not in out  # the job's own stdout does not carry the hardware evidence


def test_app_error_repeats_at_same_iteration_every_attempt(tmp_path: Path) -> None:
    fault = {"id": "a1", "type": "app_error", "at_iter": 12, "node": "node1", "rank": 0}
    env = {"TRAINMEDIC_FAULTS": json.dumps([fault])}
    for attempt in (0, 1):
        codes, out = run_job(tmp_path, nproc=1, iters=400, env=env, attempt=attempt)
        assert codes[0] != 0, out
        assert "KeyError: 'decoder.layers.12.weight'" in out
        assert "Traceback (most recent call last):" in out
        assert max(it for _, _, it, *_ in progress(out)) == 11
    history = (tmp_path / "faults.log").read_text().splitlines()
    assert [json.loads(h)["iteration"] for h in history] == [12, 12]


def test_slow_rank_raises_own_compute_and_peers_wait(tmp_path: Path) -> None:
    write_faults(tmp_path, {"id": "s1", "type": "slow", "node": "node2", "slow_s": 0.05})
    codes, out = run_job(tmp_path, nproc=1, iters=40, extra=("--step-sleep", "0"))
    assert codes == [0, 0], out
    rows = [r for r in progress(out) if r[2] > 5]
    slow = sorted(c for rank, _n, _i, _s, c, _w in rows if rank == 1)
    fast_wait = sorted(w for rank, _n, _i, _s, _c, w in rows if rank == 0)
    fast_compute = sorted(c for rank, _n, _i, _s, c, _w in rows if rank == 0)
    assert slow[len(slow) // 2] >= 0.05
    assert fast_compute[len(fast_compute) // 2] < 0.02
    assert fast_wait[len(fast_wait) // 2] > 0.03


def test_workers_stop_when_torchrun_is_killed(tmp_path: Path) -> None:
    """SIGKILL of torchrun leaves its workers (own sessions) behind; they must stop."""
    env = dict(os.environ, TRAINMEDIC_NODE="node1", OMP_NUM_THREADS="1")
    command = [
        "-m",
        "trainmedic.demo.trainer.cli",
        "--run-dir",
        str(tmp_path),
        "--iters",
        "1000000",
    ]
    argv = torchrun_argv(1, 0, 2, free_port(), command, python=sys.executable)
    out = tmp_path / "out"
    with open(out, "wb") as handle:
        launcher = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while " iter=5 " not in out.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = [
            int(p) for p in os.listdir("/proc") if p.isdigit() and _child_of(int(p), launcher.pid)
        ]
        assert len(workers) == 2
    finally:
        launcher.kill()
        launcher.wait()
    deadline = time.monotonic() + 30
    while any(pid_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(pid) for pid in workers)
    assert "launcher process" in out.read_text()


def _child_of(pid: int, parent: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return int(stat[stat.rfind(b")") + 2 :].split()[1]) == parent
