"""Sources and detectors against the real example trainer (torchrun + gloo, 2 nodes x 2 ranks).

The loop a service runs, minus attribution: follow each node's output with JobLogSource,
feed JobDetectorState, check every 0.1 s. Measures detection latency on a real, noisy job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainmedic.core.detect import SMALL_JOB, Anomaly, JobDetectorState
from trainmedic.core.model import Kind
from trainmedic.core.observations import JobStatus, Progress
from trainmedic.core.states import JobState
from trainmedic.schedulers.local.launch import free_port, torchrun_argv
from trainmedic.sources.joblog import JobLogSource

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]
JOB = "live"


@dataclass
class Run:
    anomalies: list[Anomaly]
    max_iteration: int
    checkpoint_begun: bool


def watch_trainer(
    run_dir: Path,
    faults: list[dict[str, object]],
    extra: tuple[str, ...],
    stop_on: Kind,
    limit_s: float,
) -> Run:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "faults.json").write_text(json.dumps(faults))
    port = free_port()
    command = ["-m", "trainmedic.demo.trainer.cli", "--run-dir", str(run_dir), "--iters", "100000",
               *extra]  # fmt: skip
    procs: list[subprocess.Popen[bytes]] = []
    outs = []
    for node_rank in range(2):
        node = f"node{node_rank + 1}"
        out = run_dir / f"{node}.out"
        outs.append(out)
        env = dict(os.environ, TRAINMEDIC_NODE=node, OMP_NUM_THREADS="1",
                   TRAINMEDIC_KERNEL_LOG=str(run_dir / node / "kern.log"))  # fmt: skip
        with open(out, "wb") as handle:
            procs.append(
                subprocess.Popen(
                    torchrun_argv(2, node_rank, 2, port, command, python=sys.executable),
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # its own process group: killed as one below
                )
            )
    source = JobLogSource(JOB, outs)
    state = JobDetectorState(JOB, SMALL_JOB)  # the example trainer: a report every step
    state.observe(JobStatus(time.time(), JOB, JobState.RUNNING, ("node1", "node2")))
    found: list[Anomaly] = []
    max_iteration = 0
    begun = False
    try:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and all(p.poll() is None for p in procs):
            for obs in source.poll():
                state.observe(obs)
                if isinstance(obs, Progress):
                    max_iteration = max(max_iteration, obs.iteration)
                begun = begun or (getattr(obs, "in_progress", False) is True)
            found += state.check(time.time())
            if any(a.kind is stop_on for a in found):
                break
            time.sleep(0.1)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        source.close()
    return Run(found, max_iteration, begun)


def test_real_slow_rank_is_named_and_healthy_phase_has_no_false_straggler(tmp_path: Path) -> None:
    fault = {"id": "s1", "type": "slow", "node": "node2", "rank": 2, "at_iter": 300,
             "slow_s": 0.05, "persistent": True}  # fmt: skip
    run = watch_trainer(tmp_path, [fault], ("--ckpt-every", "100"), Kind.STRAGGLER, 90.0)
    assert run.max_iteration > 300, run
    (anomaly,) = run.anomalies
    assert anomaly.kind is Kind.STRAGGLER, anomaly
    assert anomaly.iteration is not None and anomaly.iteration >= 300, "nothing before the fault"
    assert anomaly.ranks == (2,) and anomaly.nodes == ("node2",), anomaly.basis
    print(f"straggler at iteration {anomaly.iteration}, {anomaly.latency:.2f}s: {anomaly.basis}")


def test_real_hang_detected_within_threshold_and_slow_checkpoint_is_no_hang(tmp_path: Path) -> None:
    fault = {"id": "h1", "type": "hang", "node": "node2", "rank": 3, "at_iter": 180}
    # A checkpoint at 150 takes 6.5 s, longer than the 5 s hang floor: no hang may be reported.
    extra = ("--ckpt-every", "150", "--ckpt-delay", "6.5")
    run = watch_trainer(tmp_path, [fault], extra, Kind.HANG, 90.0)
    assert run.checkpoint_begun
    hangs = [a for a in run.anomalies if a.kind is Kind.HANG]
    assert [a.kind for a in run.anomalies] == [Kind.HANG], run.anomalies
    (hang,) = hangs
    assert hang.iteration is not None and hang.iteration >= 179, hang
    threshold = SMALL_JOB.hang_floor_s
    assert hang.latency <= threshold + 2.0, hang
    print(f"hang latency {hang.latency:.2f}s (threshold {threshold}s): {hang.basis}")
