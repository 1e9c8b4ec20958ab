"""The lab harness itself: real munge, slurmctld and slurmd daemons."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from trainmedic.slurmlab import SlurmCluster, SlurmLabUnavailable, procs

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


def test_nodes_idle_with_own_kernel_log_and_telemetry(slurm_cluster: SlurmCluster) -> None:
    assert slurm_cluster.node_states() == {n: "idle" for n in slurm_cluster.nodes}
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
        daemons = [d.pid for d in second._daemons.values()]
    finally:
        second.stop()
    assert not [p for p in daemons + sorted(job_pids) if procs.is_running(p)]
    assert slurm_cluster.node_states() == {n: "idle" for n in slurm_cluster.nodes}
