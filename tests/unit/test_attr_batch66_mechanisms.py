"""Mechanisms read after batch66..batch67's first sight (batch systems other than Slurm,
expert-parallel communication and long-context parallelism): each a family of messages
(other tools', versions' and launchers' wordings of the same failure) with near-misses that
must stay apart, never one log's lines (the batches' own logs are scored by
test_attr_realworld's floors). Most are a service the job leans on that is neither its code
nor the hardware: a batch system's status query or step-launch daemon, the topology
library, the EP library and its GPU-initiated RDMA transport."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import family_test, healthy_test, verdict_of

from trainmedic.core.model import Category, Kind

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a status poll for a job the batch system keeps only as history: the poller never sees
    # its job end (the batch system's interface, a guess)
    "pbs_history_only": (
        "2024-03-02 10:11:12 parsl.providers.pbspro.pbspro:103 _status WARNING: qstat failed "
        "with retcode:35 STDERR:qstat: 771.pbs-admin Job has finished, use -x or -H to obtain "
        "historical job information\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "torque_unknown_job_id": (
        "qstat: Unknown Job Id Error 4402.head01.cluster\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "lsf_job_not_found": ("$ bjobs 8812\nJob <8812> is not found\n", Category.SCHEDULER, Kind.HANG),
    # the step launcher could not reach the allocation's resource-manager daemon
    "jsrun_rm_connection": (
        "01-15-2023 03:22:11:001 91234 main: Error initializing RM connection. Exiting.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "jsrun_inet_socket": (
        "jsrun: Error: error in ptssup_mkcltsock_inet()\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # the topology library cannot map the job's devices: the node's software
    "flux_mapper_lookup": (
        "[ +2.104411] sdexec-mapper.err[3]: lookup failed: [Errno 0] rhwloc_map_gpu_pci_addrs "
        "failed\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "slurmd_topology_load": (
        "slurmd: error: hwloc_topology_load() failed.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the alpha GPU support's admission refusal: the kubelet's accounting
    "kubelet_alpha_gpus_status": (
        "NAME      READY     STATUS                                                            "
        " RESTARTS   AGE\n"
        "trainer   0/1       requested number of GPUs unavailable. Requested: 2, Available: 1"
        "   0          12s\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "kubelet_alpha_gpus_message": (
        "Message:        requested number of GPUs unavailable. Requested: 8, Available: 6\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # torch failing CUDA's initialisation with "unknown error": the node's or container's
    # device set-up, not a GPU that failed under a running job
    "torch_raises_at_init": (
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/opt/conda/lib/python3.8/site-packages/torch/cuda/__init__.py", '
        "line 190, in _lazy_init\n"
        "[rank2]:     torch._C._cuda_init()\n"
        "[rank2]: RuntimeError: CUDA unknown error - this may be due to an incorrectly set up "
        "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. "
        "Setting the available devices to be zero.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "thc_init_999": (
        "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=47 error=999 : "
        "unknown error\n"
        "RuntimeError: cuda runtime error (999) : unknown error at "
        "/pytorch/aten/src/THC/THCGeneral.cpp:47\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a GPU that fails under a running job stays the GPU's
    "unknown_error_mid_run": (
        "step 1200 loss 2.31\nRuntimeError: CUDA error: unknown error\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    # DeepEP's kernels timing out with no fabric line: the library or its transport's
    # configuration (a guess)
    "deepep_combine_sender": (
        "DeepEP combine NVL sender timeout, channel: 3, RDMA: 1, nvl: 2, dst NVL: 5, head: 120\n"
        "DeepEP combine NVL sender timeout, channel: 7, RDMA: 1, nvl: 2, dst NVL: 1, head: 64\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "deepep_intranode_receivers": (
        "DeepEP timeout for dispatch receivers, rank 5, responsible_channel = 2, tokens "
        "remained: 17\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    # ... and a fabric error before them is the fabric's
    "deepep_after_link_down": (
        "[ 8812.5] mlx5_core 0000:c1:00.1: mlx5_port_change_event:741:(pid 0): Port state "
        "changed to DOWN\n"
        "DeepEP dispatch RDMA receiver timeout, channel: 9, RDMA: 1, nvl: 0, src RDMA: 0\n",
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    # NVSHMEM's IBGDA transport refused its DEVX objects: permissions or the driver's build
    "devx_umem_reg": (
        "/opt/nvshmem/src/modules/transport/ibgda/ibgda.cpp:2104: non-zero status: 22 "
        "mlx5dv_devx_umem_reg failed\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "devx_obj_create": (
        "nvshmem transport: mlx5dv_devx_obj_create() returned NULL (errno 1: Operation not "
        "permitted)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the NCCL watchdog thread's stack with its message cut: a collective timeout, read as
    # such (timeouts alone: the ranks' own work, a guess)
    "watchdog_stack_comm_watchdog": (
        "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1521 (most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f01 in "
        "/usr/lib/python3/dist-packages/torch/lib/libc10.so)\n"
        "frame #1: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x80 (0x7f3c in "
        "/usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so)\n"
        "frame #2: <unknown function> + 0xdc253 (0x7f71 in /lib/x86_64-linux-gnu/libstdc++.so.6)\n",
        Category.APPLICATION,
        Kind.HANG,
    ),
    "watchdog_stack_cleanup_loop": (
        "frame #4: c10d::ProcessGroupNCCL::workCleanupLoop() + 0x5c (0x7fa0 in "
        "/opt/torch/lib/libtorch_cuda.so)\n"
        "frame #5: <unknown function> + 0xd6df4 (0x7fa1 in /lib/x86_64-linux-gnu/libstdc++.so.6)\n",
        Category.APPLICATION,
        Kind.HANG,
    ),
}

_HEALTHY: dict[str, str] = {
    "qstat_history_query": (
        "$ qstat -x 1234.pbs01\njob_state = F\nExit_status = 0\nstep 900 loss 1.02\n"
    ),
    "lsf_submitted": "Job <52731> is submitted to queue <gpu>.\n",
    "rm_connection_up": "main: RM connection initialized, 6 resource sets\nstep 1 loss 3.2\n",
    # servers with Intel VMD print it for NVMe drives at every start, and run well
    "hwloc_skips_vmd_device": (
        "hwloc/linux: Ignoring PCI device with non-16bit domain.\n"
        "Pass --enable-32bits-pci-domain to configure to support such devices\n"
        "(warning: it would break the library ABI, don't enable unless really needed).\n"
        "step 100 loss 2.1\n"
    ),
    "pod_running": (
        "NAME   READY   STATUS    RESTARTS   AGE\ngpu    1/1     Running   0          7s\n"
    ),
    "deepep_combine_done": "DeepEP combine finished: 4096 tokens in 312 us\nstep 10 loss 4.0\n",
    "devx_ready": (
        "NVSHMEM: IBGDA transport ready, mlx5dv_devx_uar mapped at 0x7f3a00000000\n"
        "mlx5: devx is supported on mlx5_0\n"
    ),
}

test_mechanism_families = family_test(_FAILURES)
test_healthy_lookalikes = healthy_test(_HEALTHY)


_GUESSES = (
    "pbs_history_only",
    "torque_unknown_job_id",
    "deepep_combine_sender",
    "watchdog_stack_comm_watchdog",
)


@pytest.mark.parametrize("name", _GUESSES)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A poll of a finished job could be the poller's own use of the query; a kernel timeout
    alone or a watchdog stack whose message was cut could be the fabric or the ranks'
    code: restart, never stop or drain on these."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, (name, verdict)


def test_a_cuda_error_raised_through_the_watchdog_keeps_its_own_reading(
    tmp_path: Path,
) -> None:
    """The watchdog's stack under a CUDA error it rethrew: the error decides, not the
    timeout the stack alone would stand for."""
    verdict = verdict_of(
        tmp_path,
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [Rank 3] Process group watchdog thread terminated with exception: CUDA "
        "error: an illegal memory access was encountered\n"
        "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 "
        "(most recent call first):\n"
        "frame #4: c10d::ProcessGroupNCCL::watchdogHandler() + 0x10c (0x7f1 in "
        "/opt/torch/lib/libtorch_cuda.so)\n",
    )
    assert verdict.failure, verdict
    assert verdict.root_cause is not None, verdict
    assert verdict.root_cause.signature.startswith("cuda."), verdict
