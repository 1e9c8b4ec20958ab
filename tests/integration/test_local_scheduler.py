"""The local scheduler with real torchrun + the example trainer: crash, requeue excluding the
bad node, resume from checkpoint, re-adoption by a second instance, hold/release, cancel."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.waiting import wait

from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.base import JobInfo
from trainmedic.schedulers.local.scheduler import LocalJobSpec, LocalScheduler

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

NODES = ("node1", "node2", "node3", "node4")


def job_processes(cluster: Path) -> list[int]:
    """Live processes started for this cluster directory (found by their environment)."""
    needle = f"TRAINMEDIC_KERNEL_LOG={cluster}/".encode()
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        if needle in environ and stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z":
            pids.append(int(entry))
    return pids


def after_banner(out: Path, attempt: int) -> str:
    parts = out.read_text().split(f" attempt={attempt} nodes=")
    return parts[1] if len(parts) > 1 else ""


def test_crash_requeue_exclude_resume_readopt_cancel(tmp_path: Path) -> None:
    cluster, run = tmp_path / "cluster", tmp_path / "run"
    sched = LocalScheduler(cluster, nodes=NODES, grace_s=3.0)
    command = ("-m", "trainmedic.demo.trainer.cli", "--run-dir", str(run))
    spec = LocalJobSpec(
        name="t", nnodes=2, nproc_per_node=1, run_dir=str(run),
        command=(*command, "--iters", "100000", "--ckpt-every", "20"),
    )  # fmt: skip
    out = run / "job.out"
    job_id = sched.submit(spec)
    try:
        info = sched.poll([job_id]).jobs[0]
        assert (info.state, info.nodes, info.attempt) == (JobState.RUNNING, ("node1", "node2"), 0)
        assert info.stdout_path == str(out)
        wait("a checkpoint", lambda: "checkpoint saved iter=20" in out.read_text(), 90)
        nodes = {n.name: n.state for n in sched.poll([job_id]).nodes}
        assert nodes == {
            "node1": NodeState.ALLOCATED, "node2": NodeState.ALLOCATED,
            "node3": NodeState.IDLE, "node4": NodeState.IDLE,
        }  # fmt: skip

        (run / "faults.json").write_text(
            json.dumps([{"id": "k", "type": "sigkill", "node": "node2"}])
        )

        def failed() -> JobInfo | None:
            job = sched.poll([job_id]).jobs[0]
            return job if job.state is JobState.FAILED else None

        info = wait("FAILED", failed, timeout=30)
        fired_at = json.loads((run / "faults.fired" / "k").read_text())["time"]
        assert time.time() - fired_at < 15.0  # ~1 s on an idle machine; CI is shared
        assert info.exit_code not in (None, 0)
        # Either torchrun may end first; the other is stopped (like srun) and named as such.
        assert re.fullmatch(
            r"NonZeroExitCode: (node1|node2) exit 1(, node[12] exit 1|; stopped: node[12])",
            info.reason,
        ), info.reason
        assert job_processes(cluster) == []  # the surviving node was stopped too, like srun

        sched.requeue(job_id, ["node2"])
        info = sched.poll([job_id]).jobs[0]
        assert info.state is JobState.RUNNING and "node2" not in info.nodes
        assert (info.attempt, info.excluded_nodes) == (1, ("node2",))
        assert info.nodes[0] == "node1"  # previous nodes are preferred
        wait(
            "progress after resume", lambda: re.search(r" iter=\d+ loss=", after_banner(out, 1)), 90
        )
        resumed = re.search(r"resumed from checkpoint iter=(\d+)", after_banner(out, 1))
        assert resumed and int(resumed[1]) >= 20
        first = re.search(r"\[rank0\] node=node1 iter=(\d+) ", after_banner(out, 1))
        assert first and int(first[1]) == int(resumed[1]) + 1

        # A second instance (the service restarted after kill -9) re-adopts the running job.
        adopted = LocalScheduler(cluster)
        again = adopted.poll([job_id]).jobs[0]
        assert (again.state, again.nodes, again.attempt) == (JobState.RUNNING, info.nodes, 1)

        adopted.hold(job_id)
        held = adopted.poll([job_id]).jobs[0]
        assert (held.state, held.held) == (JobState.PENDING, True)
        assert job_processes(cluster) == []
        adopted.release(job_id)
        assert adopted.poll([job_id]).jobs[0].state is JobState.RUNNING
        assert adopted.poll([job_id]).jobs[0].attempt == 2
        # Cancelled below while its torchrun is still starting: nothing may survive that.
    finally:
        LocalScheduler(cluster).cancel(job_id, "test over")
    assert sched.poll([job_id]).jobs[0].state is JobState.CANCELLED
    assert job_processes(cluster) == []
    assert out.read_text().count("trainmedic-local job=1") == 3


SUBMITTER = """
import sys, time
from trainmedic.schedulers.local.scheduler import LocalJobSpec, LocalScheduler
sched = LocalScheduler(sys.argv[1], nodes=("node1", "node2", "node3"))
command = ("-m", "trainmedic.demo.trainer.cli", "--run-dir", sys.argv[2], "--iters", "100000")
print(sched.submit(LocalJobSpec("k", 2, 1, command, sys.argv[2])), flush=True)
time.sleep(600)
"""


def test_service_killed_minus_9_job_survives_and_is_readopted(tmp_path: Path) -> None:
    cluster, run = tmp_path / "cluster", tmp_path / "run"
    service = subprocess.Popen(
        [sys.executable, "-c", SUBMITTER, str(cluster), str(run)], stdout=subprocess.PIPE
    )
    assert service.stdout is not None
    job_id = service.stdout.readline().decode().strip()
    service.send_signal(signal.SIGKILL)
    service.wait()
    try:
        out = run / "job.out"
        wait("progress", lambda: re.search(r" iter=\d+ loss=", out.read_text()), 90)
        info = LocalScheduler(cluster).poll([job_id]).jobs[0]
        assert (info.state, info.nodes) == (JobState.RUNNING, ("node1", "node2"))
        assert job_processes(cluster)  # the job kept running without its service
    finally:
        LocalScheduler(cluster).cancel(job_id, "test over")
    assert job_processes(cluster) == []


# Submits a 2-node job and is SIGKILLed between spawning its first and its second node.
DIES_WHILE_STARTING = """
import os, signal, sys
from trainmedic.schedulers.local.scheduler import LocalJobSpec, LocalScheduler
sched = LocalScheduler(sys.argv[1], nodes=("node1", "node2", "node3"), grace_s=1.0)
real_spawn = sched._procs.spawn
def spawn_then_die(job, launch, port):
    started = real_spawn(job, launch, port)
    if launch.node_rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    return started
sched._procs.spawn = spawn_then_die
command = ("-m", "trainmedic.demo.trainer.cli", "--run-dir", sys.argv[2], "--iters", "100000")
sched.submit(LocalJobSpec("k", 2, 1, command, sys.argv[2]))
"""


def test_a_start_interrupted_by_kill_9_is_finished_as_the_same_attempt(tmp_path: Path) -> None:
    cluster, run = tmp_path / "cluster", tmp_path / "run"
    died = subprocess.run([sys.executable, "-c", DIES_WHILE_STARTING, str(cluster), str(run)])
    assert died.returncode == -signal.SIGKILL
    sched = LocalScheduler(cluster)
    try:
        (info,) = sched.poll(["1"]).jobs
        # The half-started launch is stopped and the job starts again, still attempt 0: no
        # requeue happened, so none may be counted.
        assert (info.state, info.attempt) == (JobState.RUNNING, 0)
        out = run / "job.out"
        wait("progress", lambda: re.search(r" iter=\d+ loss=", out.read_text()), 90)
        time.sleep(2.0)  # the stopped launch's wrapper has long written its exit status
        (info,) = sched.poll(["1"]).jobs
        assert (info.state, info.attempt) == (JobState.RUNNING, 0)
        banners = re.findall(r"trainmedic-local job=1 name=k attempt=(\d+)", out.read_text())
        assert banners == ["0", "0"]  # one banner per start, no attempt 1
    finally:
        sched.cancel("1", "test over")
    assert job_processes(cluster) == []
