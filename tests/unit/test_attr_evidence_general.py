"""The general evidence layer on short, unfamiliar failure lines (d-fix08): one-line errors,
shell-echoed errors, status tables with a failed state, health-check reports, heartbeat
losses. Each must name a category from its words with a confidence of at most 0.45 and a
basis that says the evidence layer spoke; the healthy output of the same tools stays "no
failure". The lines are in other tools' wordings than any real log the cues were built on.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.attribute.evidence import EVIDENCE_CONFIDENCE
from trainmedic.core.logparse.evidence import is_failure_text, may_be_evidence
from trainmedic.core.model import Category

UNFAMILIAR: dict[str, tuple[str, Category]] = {
    "chown_invalid_user": ("chown: invalid user: 'trainer'\n", Category.SYSTEM_SOFTWARE),
    "clock_behind_certificate": (
        "error: TLS handshake failed: x509: certificate is not yet valid\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "node_state_reason": (
        "[2025-01-02T10:00:00] update_node: node gpu-4 reason set to: NHC: check failed\n",
        Category.SCHEDULER,
    ),
    "qstat_cannot_reach_server": (
        "qstat: cannot connect to server pbs01 (errno=111)\n",
        Category.SCHEDULER,
    ),
    "controller_connection_lost": ("FAILED: connection to slurmctld lost\n", Category.SCHEDULER),
    "dask_worker_heartbeat": (
        "distributed.nanny - ERROR - Worker tcp://10.0.0.4:4012 heartbeat expired\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "status_table_image_pull": (
        "NAME       READY   STATUS         RESTARTS   AGE\n"
        "worker-2   0/1     ErrImagePull   0          1m\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "init_container_crashloop": (
        "trainer-0   0/1   Init:CrashLoopBackOff   6   11m\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "ibdiagnet_fail": (
        "-E- ibdiagnet: link with bad width detected on port 12\n",
        Category.NETWORK_HARDWARE,
    ),
    "health_check_fail_port": (
        "[FAIL] ib0 port state: Down (expected Active)\n",
        Category.NETWORK_HARDWARE,
    ),
    "bond_member_down": (
        "bond0: link status definitely down for interface eth2, disabling it\n",
        Category.NETWORK_HARDWARE,
    ),
    "alluxio_read_timeout": (
        "ERROR alluxio.client.file: Failed to read block 42 from worker: DEADLINE_EXCEEDED\n",
        Category.STORAGE,
    ),
    "dfuse_error": ("dfuse: error: DER_TIMEDOUT on read of /mnt/daos/x\n", Category.STORAGE),
    "portal_state_node_fail": ("status: FAILED  reason: NODE_FAIL\n", Category.NODE_HARDWARE),
    "state_timeout_row": ("wrapper: final state DEADLINE, exit 1\n", Category.SCHEDULER),
    "node_disk_pressure_event": (
        "Warning  NodeHasDiskPressure  node/gpu-3  Node gpu-3 status is now: NodeHasDiskPressure\n",
        Category.STORAGE,
    ),
    "pod_sandbox_network": (
        "Warning  FailedCreatePodSandBox  1m  kubelet  Failed to create pod sandbox: rpc error: "
        "failed to setup network for sandbox\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "pip_no_matching_version": (
        "ERROR: No matching distribution found for flash-attn==2.5.8\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "gpu_hw_slowdown_in_force": (
        "[GPU 3] throttling: HW Slowdown, HW Thermal Slowdown\n",
        Category.GPU_HARDWARE,
    ),
    "amd_gpu_ras": (
        "Error: AMD GPU 2 reported a RAS uncorrectable error, please reset\n",
        Category.GPU_HARDWARE,
    ),
    "node_rebooted_unexpectedly": (
        "ERROR: Job failed: node gpu-3 rebooted unexpectedly\n",
        Category.NODE_HARDWARE,
    ),
    "efa_alloc_pd_enomem": (
        "infiniband efa_1: Failed to process command CREATE_QP (opcode 1) comp_status 1 err -12\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "nvidia_smi_err_marker": (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5a1b) ERR!\n",
        Category.GPU_HARDWARE,
    ),
    "azcopy_server_busy": (
        "azcopy: failed to perform copy command due to error: cannot transfer: ServerBusy\n",
        Category.STORAGE,
    ),
    "bsub_refused": ("bsub: error: project not found: gpu-research\n", Category.SCHEDULER),
    "job_requeued": ("slurmctld: Requeuing JobId=1234\n", Category.SCHEDULER),
    "dcgm_health_fail": (
        "DCGM health check: FAIL - GPU 3 PCIe replay rate exceeded\n",
        Category.GPU_HARDWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(UNFAMILIAR))
def test_unfamiliar_failure_line_names_a_category_as_a_guess(tmp_path: Path, name: str) -> None:
    text, category = UNFAMILIAR[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure and verdict.category is category, verdict.basis
    assert verdict.confidence <= EVIDENCE_CONFIDENCE
    assert verdict.basis.startswith("evidence:") or "named by evidence" in verdict.basis


@pytest.mark.parametrize(
    "line",
    [
        "worker-2   0/1   ImagePullBackOff   0   3m",
        "JobState=FAILED Reason=OUT_OF_MEMORY",
        "Removing worker-7 because we got no heartbeat in 60 seconds",
        "(ReqNodeNotAvail, UnavailableNodes:gpu-[01-04])",
    ],
)
def test_state_words_are_failure_evidence(line: str) -> None:
    assert may_be_evidence(line.encode()) and is_failure_text(line)


HEALTHY: dict[str, str] = {
    "pods_running": (
        "NAME       READY   STATUS    RESTARTS   AGE\ntrainer-0  1/1     Running   0          2m\n"
    ),
    "bond_up": "bond0: link status up for interface eth2, enabling it in 200 ms\n",
    "heartbeat_sent": "INFO heartbeat sent to master in 3 ms\nheartbeat_interval=10\n",
    "sacct_completed": "4412  train  gpu  COMPLETED  0:0\n",
    "dcgm_pass": "DCGM health check: PASS - all GPUs healthy\n",
    "queue_waiting": "  88123  gpu  train  alice PD  0:00  4 (Resources)\n",
    "ibstat_active": "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tRate: 200\n",
    "fuse_kernel": "fused kernel compiled for sm_90 in 3.1 s\n",
    "describe_node_conditions": (
        "Conditions:\n  Type             Status  Reason                       Message\n"
        "  MemoryPressure   False   KubeletHasSufficientMemory   kubelet has sufficient memory\n"
        "  DiskPressure     False   KubeletHasNoDiskPressure     kubelet has no disk pressure\n"
        "  Ready            True    KubeletReady                 kubelet is posting ready status\n"
    ),
    "node_has_no_disk_pressure": (
        "Normal  NodeHasNoDiskPressure  node/gpu-3  "
        "Node gpu-3 status is now: NodeHasNoDiskPressure\n"
    ),
    "pip_installed": "Successfully installed torch-2.3.0 triton-2.3.0\n",
    "nvsmi_throttle_reasons_idle": (
        "    Clocks Event Reasons\n"
        "        Idle                              : Active\n"
        "        HW Slowdown                       : Not Active\n"
        "        HW Thermal Slowdown               : Not Active\n"
    ),
    "spark_normal_run": (
        "24/03/17 14:30:01 INFO Master: Registering worker 10.0.0.2:45720 with 16 cores\n"
        "24/03/17 14:30:02 INFO Executor: Told to re-register on heartbeat\n"
        "24/03/17 14:36:25 INFO Master: Removing executor app-2024/0 because it is EXITED\n"
        "24/03/17 14:36:26 INFO SparkContext: Successfully stopped SparkContext\n"
    ),
    "coordination_heartbeats_received": (
        "I0101 10:00:00.000 coordination_service_agent.cc:300] Coordination agent has "
        "successfully connected.\n"
        "I0101 10:00:01.000 coordination_service.cc:500] Heartbeat from task 3 received\n"
        "I0101 10:05:00.000 trainer.py:501] Training: step 200\n"
    ),
    "wrapper_settings_and_progress": (
        "[2024-05-01 10:00:00] INFO Requeue on preemption: enabled\n"
        "[2024-05-01 10:00:01] INFO free disk space 812 GiB, needed 120 GiB: ok\n"
        "[2024-05-01 10:00:02] INFO juicefs mount ready at /jfs\n"
        "[2024-05-01 10:00:05] epoch 1 step 100 loss 3.21\n"
    ),
    "nvidia_smi_one_err_field": (
        "| N/A   29C    P0   ERR! / 250W |    593MiB / 16160MiB |      0%      Default |\n"
    ),
    "sbatch_no_requeue": "#SBATCH --no-requeue\n#SBATCH --time=01:00:00\nstep 100 loss 2.1\n",
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_output_of_the_same_tools_is_no_failure(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert not verdict.failure, verdict.basis


@pytest.mark.parametrize(
    "line",
    [
        'Warning  Unhealthy  kubelet  Liveness probe failed: Get "http://10.0.0.5:8080/healthz": '
        "context deadline exceeded\n",
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Deadline Exceeded\n",
    ],
)
def test_an_rpc_deadline_is_not_the_schedulers(tmp_path: Path, line: str) -> None:
    verdict = _verdict(tmp_path, line)
    assert verdict.failure and verdict.category is not Category.SCHEDULER, verdict.basis
