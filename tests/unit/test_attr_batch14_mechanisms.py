"""Mechanisms batch14 taught, each tested on lines in other shapes than the batch's, and on
healthy lines of the same kind, which must stay as they were.

Healthy benchmark and setup output is no failure: NCCL naming the transport it chose is one of
its opening lines, nccl-tests' result header means its communicators were set up, a device
answering a capability query with NVML's "Not Supported" and a warning whose only cost is
performance are no failure lines. Shared-memory segments an intra-node transport could not
create or attach, and a host daemon that systemd reports failed, are the host's software. A
batch system deleting a job, or a job over a limit it enforces, is failure evidence. Pods
waiting for devices whose device plug-in is crash-looping wait for the plug-in, not for
capacity. A benchmark whose result row repeats on the next line ran as independent copies.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import healthy_test
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

_RCCL_HEADER = (
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid   4101 on     node-a device  0 [0000:c1:00.0] AMD Instinct MI250X\n"
    "#\n"
    "#                                                              out-of-place"
    "                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
)

FAILURES: dict[str, tuple[str, Category]] = {
    "ucx_sysv_attach_refused": (
        "[1712000000.123456] [gpu-3:2211:0]        mm_sysv.c:114  UCX  ERROR shmat(shmid=1605634)"
        " failed: Invalid argument\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "open_mpi_vader_attach_failed": (
        "[node7:04412] btl_vader: failed to attach to the shared memory segment of peer 3: "
        "Invalid argument\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "persistenced_unit_failed": (
        "Mar 04 09:12:40 gpu-7 systemd[1]: nvidia-persistenced.service: Main process exited, "
        "code=exited, status=1/FAILURE\n"
        "Mar 04 09:12:40 gpu-7 systemd[1]: nvidia-persistenced.service: Failed with result "
        "'exit-code'.\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "container_runtime_unit_failed": (
        "$ systemctl status containerd\n"
        "● containerd.service - containerd container runtime\n"
        "     Active: failed (Result: exit-code) since Tue 2025-03-04 09:12:40 UTC; 2min ago\n"
        "    Process: 2211 ExecStart=/usr/bin/containerd (code=exited, status=1/FAILURE)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    # a hardware vendor's daemon: its name and paths say GPU or NIC, the unit is software
    "dcgm_host_engine_unit_failed": (
        "● nvidia-dcgm.service - NVIDIA DCGM service\n"
        "     Active: failed (Result: exit-code) since Tue 2025-03-04 09:12:40 UTC; 2min ago\n"
        "    Process: 990 ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm "
        "(code=exited, status=1/FAILURE)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "openibd_unit_failed": (
        "systemd[1]: openibd.service: Main process exited, code=exited, status=1/FAILURE\n"
        "systemd[1]: Failed to start openibd - configure Mellanox devices.\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "torque_job_over_walltime": (
        "PBS Job Id: 812.head\nJob Name:   train\n"
        "Job exceeded its walltime limit. Job was aborted\n",
        Category.SCHEDULER,
    ),
    "pbs_job_deleted_by_operator": (
        "PBS Job Id: 4471.sched01\nJob Name:   ddp\nJob deleted at request of operator@sched01\n",
        Category.SCHEDULER,
    ),
    "amd_devices_missing_while_plugin_crashloops": (
        "  Warning  FailedScheduling  3m  default-scheduler  0/2 nodes are available: "
        "2 Insufficient amd.com/gpu. preemption: 0/2 nodes are available: 2 No preemption "
        "victims found for incoming pod.\n"
        "kube-system   amdgpu-device-plugin-daemonset-x7k2p   0/1   CrashLoopBackOff   "
        "12 (3m ago)   40m\n",
        Category.SYSTEM_SOFTWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_mechanism_names_its_category(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure, name
    assert verdict.category is category, (name, verdict)


def test_benchmark_rows_repeated_line_after_line_are_copies_of_the_test(tmp_path: Path) -> None:
    """rccl-tests started once per rank without a shared communicator: every copy prints the
    same size's row, side by side."""
    rows = "".join(
        f"  {size:>10}  {size // 2:>12}      half     sum      -1   {t:>6}   1.20   1.20      0"
        f"   {t:>6}   1.21   1.21      0\n"
        for size in (1048576, 2097152)
        for t in (870, 905)
    )
    verdict = _verdict(tmp_path, _RCCL_HEADER + rows + "# Avg bus bandwidth    : 1.20\n")
    assert verdict.failure
    assert verdict.category is Category.APPLICATION
    assert verdict.kind is Kind.STRAGGLER
    assert verdict.confidence < 0.5


def test_a_job_over_a_limit_the_batch_system_enforces_is_a_failure(tmp_path: Path) -> None:
    """Torque's MOM: "job N exceeded <resource> usage hard limit (used > limit)"."""
    verdict = _verdict(
        tmp_path,
        "PBS Job Id: 5521.head\njob 5521 exceeded VMEM usage hard limit (8120 > 4096)\n",
    )
    assert verdict.failure
    assert verdict.confidence < 0.5


def test_devices_missing_with_a_running_plugin_stay_the_schedulers(tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path,
        "  Warning  FailedScheduling  3m  default-scheduler  0/2 nodes are available: "
        "2 Insufficient amd.com/gpu.\n"
        "kube-system   amdgpu-device-plugin-daemonset-x7k2p   1/1   Running   0   40m\n",
    )
    assert verdict.category is Category.SCHEDULER


HEALTHY: dict[str, str] = {
    # a one-GPU run on an integrated GPU: NVML answers capability queries "Not Supported"
    "nvml_not_supported_then_rows": (
        "node-a:311:311 [0] misc/nvmlwrap.cc:120 NCCL WARN nvmlDeviceGetNvLinkState(0,0) "
        "failed: Not Supported\n"
        "node-a:311:311 [0] NCCL WARN Could not find the NIC's PCI path. This may affect "
        "performance.\n" + _RCCL_HEADER + "     1048576        524288      half     sum      -1"
        "    870   1.20   1.20      0    905   1.16   1.16      0\n"
    ),
    # a capability NVML does not have on this GPU, then the job trains
    "nvml_not_supported_then_training": (
        "gpu-1:90:90 [0] misc/nvmlwrap.cc:164 NCCL WARN nvmlDeviceGetP2PStatus(0,1,"
        "NVML_P2P_CAPS_INDEX_READ) failed: Not Supported\n"
        "gpu-1:90:90 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init "
        "COMPLETE\n"
        "epoch 0 step 10 loss 2.31\nepoch 0 step 20 loss 2.18\n"
    ),
    # the excerpt ends on the result header: init had completed
    "benchmark_cut_at_its_header": (
        "node-a:311:311 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n"
        "node-a:311:311 [0] NCCL INFO Using network Socket\n"
        "node-a:311:330 [0] NCCL INFO Channel 00/02 :    0   1\n"
        "node-a:311:330 [0] NCCL WARN nvmlDeviceGetP2PStatus(0,1,NVML_P2P_CAPS_INDEX_NVLINK) "
        "failed: Not Supported\n" + _RCCL_HEADER
    ),
    # NCCL's opening lines only: the interfaces it found and the transport it chose
    "nccl_opening_with_network_choice": (
        "gpu-1:90:90 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        "gpu-1:90:90 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0\n"
        "gpu-1:90:90 [0] NCCL INFO Using network IB\n"
    ),
    "systemd_unit_running": (
        "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
        "     Active: active (running) since Mon 2025-03-03 08:00:01 UTC; 1 day ago\n"
        "    Process: 1880 ExecStart=/usr/bin/nv-fabricmanager (code=exited, status=0/SUCCESS)\n"
    ),
    # two runs pasted one after the other, one size each: no row repeats on the next line
    "two_runs_pasted_one_after_the_other": (
        _RCCL_HEADER + "  4294967296    1073741824     float     sum      -1    81146   52.93  "
        "104.20      0    80945   53.06  104.46      0\n"
        "# Avg bus bandwidth    : 104.33\n#\n" + _RCCL_HEADER + "  4294967296    1073741824     "
        "float     sum      -1    27512  156.11  292.70      0    27490  156.24  292.95      0\n"
        "# Avg bus bandwidth    : 292.82\n"
    ),
    "pbs_job_started": "PBS Job Id: 4472.sched01\nJob Name:   ddp\nBegun execution\n",
    "gradient_clip_exceeded_is_no_limit_of_the_batch_system": (
        "step 1200: grad norm 14.2 exceeded clip threshold 1.0, clipped\n"
    ),
}


test_healthy_lines_stay_healthy = healthy_test(HEALTHY)
