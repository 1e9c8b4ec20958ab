"""Mechanisms that batch03's first sight found missing, each tried on logs written for these
tests in *other* shapes than the batch's (other drivers, tools, formats), so that what is
tested is the mechanism and not one thread's lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.model import Category, Kind
from trainmedic.offline.analyze import analyze_path

DIMM = "CPU_SrcID#0_MC#2_Chan#0_DIMM#1"
RAS_LINE = (
    "{n} 2024-05-0{d} 1{d}:0{n}:11 +0200 1 Corrected error(s): memory read error at "
    f"{DIMM} location: 0:2:0:-1, addr 3{{n}}44556600, grain 5, syndrome 0"
)

CASES: dict[str, tuple[str, Category, Kind | None]] = {
    # A stream of corrected errors on one DIMM, from ras-mc-ctl (no kernel prefix): failing module.
    "rasdaemon_corrected_stream": (
        "".join(RAS_LINE.format(n=n, d=n % 9 + 1) + "\n" for n in range(1, 7)),
        Category.NODE_HARDWARE,
        None,
    ),
    "rasdaemon_uncorrected": (
        RAS_LINE.format(n=1, d=1).replace("Corrected", "Uncorrected") + "\n",
        Category.NODE_HARDWARE,
        None,
    ),
    # Other schedulers' words for a memory limit (the job's), a preemption, a refused request.
    "pbs_memory_limit": (
        "epoch 3 step 800 loss 0.9\n"
        "=>> PBS: job killed: mem 99123456kb exceeded limit 98304000kb\n",
        Category.APPLICATION,
        None,
    ),
    "lsf_preempted": (
        "step 100 loss 2.0\nTERM_PREEMPT: job killed after preemption.\n",
        Category.SCHEDULER,
        None,
    ),
    "srun_unable_to_allocate": (
        "srun: error: Unable to allocate resources: "
        "Requested node configuration is not available\n",
        Category.SCHEDULER,
        None,
    ),
    # NIC drivers saying the adapter itself failed (other drivers than ixgbe).
    "i40e_pcie_link_lost": (
        "[ 9921.002113] i40e 0000:3b:00.0: PCIe link lost, device now detached\n",
        Category.NETWORK_HARDWARE,
        None,
    ),
    "e1000e_hardware_unit_hang": (
        "Mar  3 02:11:09 node7 kernel: e1000e 0000:00:1f.6 eno1: Detected Hardware Unit Hang:\n"
        "Mar  3 02:11:09 node7 kernel:   TDH                  <1b>\n",
        Category.NETWORK_HARDWARE,
        None,
    ),
    "netdev_watchdog_tx_timeout": (
        "[ 512.1] NETDEV WATCHDOG: enp65s0f0 (bnxt_en): transmit queue 3 timed out\n",
        Category.NETWORK_HARDWARE,
        None,
    ),
    # A loop of resets with nothing else, pasted without the kernel's prefix.
    "nic_reset_loop": (
        "bnxt_en 0000:41:00.0 enp65s0f0np0: TX timeout detected, resetting the device\n" * 4,
        Category.NETWORK_HARDWARE,
        None,
    ),
    # Disk self-assessment: ATA, SCSI and NVMe shapes of smartctl / smartd.
    "smartd_failed_self_check": (
        "Device: /dev/sdc [SAT], FAILED SMART self-check. BACK UP DATA NOW!\n",
        Category.STORAGE,
        None,
    ),
    "smartctl_nvme_critical_warning": (
        "=== START OF SMART DATA SECTION ===\nSMART/Health Information (NVMe Log 0x02)\n"
        "Critical Warning:                   0x04\nTemperature:          41 Celsius\n",
        Category.STORAGE,
        None,
    ),
    "kernel_io_error_new_format": (
        "[88.1] I/O error, dev nvme1n1, sector 3390712 op 0x0:(READ) flags 0x0 phys_seg 1\n",
        Category.STORAGE,
        None,
    ),
    "nvme_timeout": ("[12.5] nvme nvme0: I/O 77 QID 3 timeout, aborting\n", Category.STORAGE, None),
    "k8s_volume_mount_failed": (
        '  Warning  FailedMount  12s  kubelet  MountVolume.SetUp failed for volume "ckpt" : '
        "mount failed: exit status 32\n",
        Category.STORAGE,
        None,
    ),
    # RDMA: protection/access errors are registration (software); retry exceeded the fabric.
    "ib_remote_access_error": (
        "n4:771:802 [2] transport/net_ib.cc:1455 NCCL WARN NET/IB : Got completion from peer "
        "10.3.0.8<40110> with status=10 opcode=1 len=0 vendor err 136 (Send)\n",
        Category.SYSTEM_SOFTWARE,
        None,
    ),
    "ucx_local_protection_error": (
        "[1700000000.1] [n4:771:0] ib_mlx5_log.c:174 UCX ERROR Error on mlx5_2:1 RC QP 0x1f "
        "wqe[12]: Local protection error (synd 0x4 vend 0x56)\n",
        Category.SYSTEM_SOFTWARE,
        None,
    ),
    "ib_rnr_retry_stays_the_network": (
        "iter 900 loss 1.2\nn4:771:802 [2] NCCL WARN NET/IB : Got completion from peer "
        "10.3.0.8<40110> with status=13 opcode=1 len=0 vendor err 135 (Send)\n",
        Category.NETWORK_HARDWARE,
        None,
    ),
    "ibv_modify_qp_einval": (
        "h2:12:40 [1] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with 22 "
        "Invalid argument\n",
        Category.SYSTEM_SOFTWARE,
        None,
    ),
    # PCIe power management / hotplug without any link or AER error: the kernel's handling.
    "pciehp_command_timeouts": (
        "[ 40.1] pcieport 0000:c0:03.1: pciehp: Timeout on hotplug command 0x13f1 (issued 1016 "
        "msec ago)\n[ 41.2] pcieport 0000:c1:00.0: Unable to change power state from D3hot to D0, "
        "device inaccessible\n",
        Category.SYSTEM_SOFTWARE,
        None,
    ),
    "power_state_after_gpu_lost_is_the_gpu": (
        "[ 40.0] NVRM: Xid (PCI:0000:c1:00): 79, pid=0, GPU has fallen off the bus.\n"
        "[ 41.2] pcieport 0000:c0:03.1: Unable to change power state from D3cold to D0, "
        "device inaccessible\n",
        Category.GPU_HARDWARE,
        None,
    ),
    # Pods that never got a place.
    "k8s_failed_scheduling": (
        "Events:\n  Type     Reason            Age   From               Message\n"
        "  Warning  FailedScheduling  41s   default-scheduler  0/16 nodes are available: "
        "16 Insufficient nvidia.com/gpu. preemption: 0/16 nodes are available\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "volcano_podgroup_not_ready": (
        "  Normal  Unschedulable  9s  volcano  pod group is not ready, 3 Pending, 4 minAvailable; "
        "Pending: 3 Unschedulable\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    # Hangs visible only as a thread dump.
    "py_spy_dump_in_all_reduce": (
        "Process 2210: python train.py\nPython v3.10.12 (/usr/bin/python3.10)\n\n"
        'Thread 2210 (idle): "MainThread"\n'
        "    all_reduce (torch/distributed/distributed_c10d.py:2050)\n"
        "    wrapper (torch/distributed/c10d_logger.py:75)\n"
        "    reduce_metrics (trainer/metrics.py:88)\n    train_epoch (train.py:140)\n"
        "    <module> (train.py:301)\n",
        Category.APPLICATION,
        Kind.HANG,
    ),
    "faulthandler_dump_in_nccl_init": (
        "Timeout (0:10:00)!\nThread 0x00007f2a11fff700 (most recent call first):\n"
        '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", '
        "line 4100 in _new_process_group_helper\n"
        '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", '
        "line 1520 in init_process_group\n"
        '  File "/work/train.py", line 20 in <module>\n',
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    # A rendezvous that never completed (Ray Train's and Lightning's words).
    "lightning_initializing_then_nothing": (
        "GPU available: True (cuda), used: True\n"
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8\n"
        "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/8\n",
        Category.APPLICATION,
        Kind.HANG,
    ),
    "ray_train_setting_up_process_group_then_nothing": (
        "(RayTrainWorker pid=811) Setting up process group for: env:// [rank=0, world_size=4]\n",
        Category.APPLICATION,
        Kind.HANG,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mechanism(tmp_path: Path, name: str) -> None:
    text, category, kind = CASES[name]
    path = tmp_path / f"{name}.log"
    path.write_text(text)
    verdict = analyze_path(path).verdict
    assert verdict.failure, name
    assert verdict.category is category, verdict.basis
    if kind is not None:
        assert verdict.kind is kind, verdict.basis


HEALTHY = {
    "one_corrected_error": RAS_LINE.format(n=1, d=1) + "\n",
    "smartctl_passed": (
        "=== START OF READ SMART DATA SECTION ===\n"
        "SMART overall-health self-assessment test result: PASSED\nNo failed Attributes found.\n"
    ),
    "describe_node_schedulable": "Unschedulable:      false\nConditions:\n  Ready   True\n",
    "elastic_events_succeeded": (
        '{"name": "torchelastic.worker.status.SUCCEEDED", "source": "WORKER", "metadata": '
        '{"global_rank": 3, "state": "SUCCEEDED", "raw_error": null, "agent_restarts": 0}}\n'
    ),
    "diag_summary_json": (
        '{\n  "event": "Diagnostic summary",\n  "passed": 9,\n  "failed": 0,\n  "errors": [],\n'
        '  "error_code": 0\n}\n'
    ),
    "exit_code_zero": "worker 3 finished, exit code 0\nAll 4 workers exited with exitcode: 0\n",
    "lightning_initializing_then_training": (
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n"
        + "".join(f"Epoch 0: {i}0%| step {i} loss {2 - i / 10:.2f}\n" for i in range(1, 9))
    ),
    "rendezvous_completed": (
        "[INFO] Rendezvous'ing worker group\n[INFO] Rendezvous complete for workers. Result:\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_shape_is_no_failure(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.log"
    path.write_text(HEALTHY[name])
    verdict = analyze_path(path).verdict
    assert not verdict.failure, verdict.basis


def test_failed_elastic_event_is_still_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "events.log"
    path.write_text(
        '{"name": "torchelastic.worker.status.FAILED", "metadata": {"global_rank": 3, '
        '"state": "FAILED", "raw_error": "{\\"message\\": \\"ValueError: bad shape\\"}"}}\n'
    )
    assert analyze_path(path).verdict.failure


def test_fatal_signal_dump_is_a_crash_not_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "segv.log"
    path.write_text(
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f0 (most recent call "
        'first):\n  File "/opt/lib/ext/ops.py", line 10 in fused_kernel\n'
        '  File "/work/train.py", line 40 in <module>\n'
    )
    verdict = analyze_path(path).verdict
    assert verdict.failure and verdict.kind is Kind.CRASH, verdict.basis
    assert "stack dump" not in verdict.basis


def test_lines_of_one_width_each_stand_on_their_own(tmp_path: Path) -> None:
    """Records of one format often share a width, which looks like a terminal's wrap: a wrap
    guess that completes no match must not swallow the line."""
    path = tmp_path / "widths.log"
    line = "{n} sync worker node-3: fatal: cannot reach object store bucket shard {n} for the ckpt"
    path.write_text("".join(line.format(n=n) + "\n" for n in range(6)))
    verdict = analyze_path(path).verdict
    assert verdict.failure and verdict.category is Category.STORAGE, verdict.basis
    assert "6 failure line(s)" in verdict.basis


def test_pod_scheduled_afterwards_is_only_a_guess(tmp_path: Path) -> None:
    path = tmp_path / "events.log"
    path.write_text(
        "  Warning  FailedScheduling  3m  default-scheduler  0/4 nodes are available: "
        "4 Insufficient nvidia.com/gpu.\n"
        "  Normal   TriggeredScaleUp  3m  cluster-autoscaler  pod triggered scale-up\n"
        "  Normal   Scheduled  1m  default-scheduler  Successfully assigned ml/trainer-0 to n9\n"
    )
    verdict = analyze_path(path).verdict
    assert verdict.category is Category.SCHEDULER and verdict.confidence < 0.5, verdict.basis
