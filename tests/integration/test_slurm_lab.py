"""The lab harness itself: real munge, slurmctld and slurmd daemons."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from trainmedic.lab import SlurmCluster, SlurmLabUnavailable, procs

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def test_nodes_idle_with_own_kernel_log_and_telemetry(slurm_cluster: SlurmCluster) -> None:
    # The cluster is shared by the session: a job an earlier test ended may still be
    # completing on a node for a few seconds.
    idle = {n: "idle" for n in slurm_cluster.nodes}
    deadline = time.monotonic() + 60
    while slurm_cluster.node_states() != idle and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm_cluster.node_states() == idle
    slurm_cluster.set_gpu_metric("node3", 2, "DCGM_FI_DEV_XID_ERRORS", 79)
    body = urllib.request.urlopen(slurm_cluster.telemetry_url("node3"), timeout=5).read()
    xid = [ln for ln in body.decode().splitlines() if ln.startswith("DCGM_FI_DEV_XID_ERRORS{")]
    assert len(xid) == slurm_cluster.gpus_per_node
    assert xid[2].startswith('DCGM_FI_DEV_XID_ERRORS{gpu="2"') and xid[2].endswith("} 79")
    assert 'Hostname="node3"' in xid[2]
    other = urllib.request.urlopen(slurm_cluster.telemetry_url("node1"), timeout=5).read()
    assert b"} 79" not in other
    assert {slurm_cluster.kernel_log(n).parent.name for n in slurm_cluster.nodes} == set(
        slurm_cluster.nodes
    )
    assert all(slurm_cluster.kernel_log(n).exists() for n in slurm_cluster.nodes)


def test_second_cluster_side_by_side_stops_exactly_its_processes(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """A second cluster runs beside the session's one, runs a job, and its stop ends its
    daemons and that job's processes, leaving the session cluster untouched."""
    second = SlurmCluster(tmp_path / "second", nodes=2, cpus_per_node=1, gpus_per_node=1)
    try:
        second.start()
    except SlurmLabUnavailable as err:
        pytest.skip(str(err))
    try:
        script = tmp_path / "job.sh"
        script.write_text("#!/bin/bash\necho on $SLURMD_NODENAME\nsleep 300\n")
        job = second.sbatch([f"--output={tmp_path}/out-%j.txt", "-N2", str(script)])
        second.wait_for("job running", lambda: second.job_state(job) == "RUNNING", 20)
        second.wait_for("job output", lambda: (tmp_path / f"out-{job}.txt").exists(), 10)
        stepds = procs.step_daemon_pids(second.layout.spool_root)
        job_pids = stepds | procs.descendants(stepds)
        assert len(stepds) == 1  # the batch step, on the first node only
        daemons = [d.pid for d in second.daemons.daemons.values()]
        # kill_node: the node's slurmd and the job processes it ran die, the rest lives on
        batch_node = second.run(["squeue", "-h", "-j", job, "-o", "%B"]).strip()
        slurmd = second.daemons.pid(f"slurmd:{batch_node}")
        second.kill_node(batch_node)
        assert slurmd is not None and not procs.is_running(slurmd)
        assert not [p for p in job_pids if procs.is_running(p)]
        assert all(d.is_ours_and_running() for d in second.daemons.daemons.values())
    finally:
        second.stop()
    assert not [p for p in daemons + sorted(job_pids) if procs.is_running(p)]
    assert slurm_cluster.node_states() == {n: "idle" for n in slurm_cluster.nodes}


def test_up_attach_down_from_other_processes(tmp_path: Path) -> None:
    """``python -m trainmedic.lab up`` in one process, ``attach`` in this one, ``down``."""
    lab = tmp_path / "cli"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    up = subprocess.run(
        [sys.executable, "-m", "trainmedic.lab", "up", "--dir", str(lab), "--nodes", "2"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    if up.returncode != 0:
        pytest.skip(up.stderr.strip())
    try:
        assert up.stdout.splitlines()[-1] == f"export SLURM_CONF={lab / 'etc' / 'slurm.conf'}"
        cluster = SlurmCluster.attach(lab)
        assert cluster.node_states() == {"node1": "idle", "node2": "idle"}
        cluster.set_gpu_metric("node2", 0, "DCGM_FI_DEV_XID_ERRORS", 48)
        body = urllib.request.urlopen(cluster.telemetry_url("node2"), timeout=5).read()
        assert b'err_code="48"} 48' in body
        pids = [d.pid for d in cluster.daemons.daemons.values()]
        assert len(pids) == 5  # munged, slurmctld, 2 slurmd, telemetry
    finally:
        down = subprocess.run(
            [sys.executable, "-m", "trainmedic.lab", "down", "--dir", str(lab)],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
    assert down.stdout.strip() == "stopped 5 processes"
    assert not [p for p in pids if procs.is_running(p)]
