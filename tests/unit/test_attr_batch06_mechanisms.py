"""Mechanisms batch06 taught, each tested on lines in other shapes than the batch's (other
libraries, tools and wordings of the same mechanism), with healthy counter-cases that must stay
"no failure".

NCCL's set-up read by phase: a log that holds only the library's opening lines (version,
environment, the interface it picked) is an excerpt of a start, not a wait inside set-up; a
communicator that was torn down cleanly or carried a benchmark's rows was set up.

The scheduler's own machinery: a prolog/epilog that failed (the node drained, the allocation
revoked or requeued held), a launch credential a node rejects, the batch script missing from
slurmd's spool, a job not granted its Slingshot network access (VNI / CXI key), which makes
libfabric's domain open answer "not implemented".

Also: a host network stack without the address family asked for; a chassis fan faulted or out
of its RPM tolerance (the node); an object store throttling requests (storage); Horovod's stall
inspector naming the ranks that never submitted a collective (the job's code); an
accelerator's fatal hardware-error events (amdgpu ACA / uncorrectable interrupts, a TPU's
fatal chip interrupt).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

FAILURES: dict[str, tuple[str, Category]] = {
    "sbatch_epilog_failed_node_drained": (
        "slurmd[gpu-b03]: error: [job 5511] epilog failed status=1:0\n"
        "NodeName=gpu-b03 State=IDLE+DRAIN Reason=Epilog error\n",
        Category.SCHEDULER,
    ),
    "srun_prolog_failed_wording": (
        "srun: error: Unable to create step for job 902: Prolog failure\n"
        "srun: error: Job allocation 902 has been revoked\n",
        Category.SCHEDULER,
    ),
    "squeue_launch_failed_held": (
        "  JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        "  31337       gpu    llama    alice PD       0:00      4 (launch failed requeued held)\n",
        Category.SCHEDULER,
    ),
    "munge_rewound_credential": (
        "[2024-02-02T08:00:01.000] error: Munge decode failed: Rewound credential\n"
        "[2024-02-02T08:00:01.000] error: slurm_unpack_received_msg: Protocol authentication "
        "error\n",
        Category.SCHEDULER,
    ),
    "invalid_job_credential": (
        "slurmstepd: error: Invalid job credential from 10.0.0.4: Job credential revoked\n",
        Category.SCHEDULER,
    ),
    "spool_script_permission_denied": (
        "slurmstepd: error: execve(): /var/spool/slurmd/job4242/slurm_script: Permission denied\n",
        Category.SCHEDULER,
    ),
    "mpich_no_cxi_service": (
        "MPICH ERROR: No matching CXI service found for this job\n"
        "Abort(1) on node 0: Fatal error in PMPI_Init\n",
        Category.SCHEDULER,
    ),
    "mpich_ofi_domain_enosys": (
        "Abort(1091215) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init: Other MPI "
        "error, error stack: OFI call domain failed (ofi_init.c:812:Function not implemented)\n",
        Category.SCHEDULER,
    ),
    "ofi_domain_no_such_device_is_not_the_scheduler": (
        "NCCL WARN NET/OFI fi_domain failed: No such device (-19)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "gloo_socket_family_unsupported": (
        "terminate called after throwing an instance of 'gloo::IoException'\n"
        "  what():  [gloo/transport/tcp/device.cc:83] EAFNOSUPPORT creating socket\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "python_errno_97": (
        '  File "/usr/lib/python3.11/socket.py", line 232, in __init__\n'
        "    _socket.socket.__init__(self, family, type, proto, fileno)\n"
        "OSError: [Errno 97] Address family not supported by protocol\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "bmc_fan_failure": (
        "Jan 03 10:00:00 node7 bmc: FAN3 FAILURE detected by system monitor\n"
        "Jan 03 10:00:05 node7 bmc: CPU1 temperature upper critical going high\n",
        Category.NODE_HARDWARE,
    ),
    "fan_module_fault_detected": (
        "Chassis: Fan Module 2 Fault detected, speed below lower critical threshold\n",
        Category.NODE_HARDWARE,
    ),
    "gcs_rate_limit": (
        "google.api_core.exceptions.TooManyRequests: 429 GET https://storage.googleapis.com/"
        "storage/v1/b/data/o/shard-0001: rateLimitExceeded\n",
        Category.STORAGE,
    ),
    "botocore_slowdown": (
        "botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the "
        "GetObject operation (reached max retries: 4): Please reduce your request rate.\n",
        Category.STORAGE,
    ),
    "azure_server_busy": (
        "azure.core.exceptions.HttpResponseError: (ServerBusy) Operations per second is over "
        "the account limit.\n",
        Category.STORAGE,
    ),
    "horovod_torch_missing_ranks": (
        "[2024-05-01 12:00:00.000000: W /tmp/horovod/common/stall_inspector.cc:107] One or "
        "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
        "and are waiting for remainder of ranks for more than 60 seconds.\n"
        "Missing ranks:\n"
        "allreduce.module.fc.weight [missing ranks: 1, 3]\n",
        Category.APPLICATION,
    ),
    "amdgpu_aca_records": (
        "[  101.200001] amdgpu 0000:05:00.0: {2}[Hardware Error]: Accelerator Check "
        "Architecture events logged\n"
        "[  101.200010] amdgpu 0000:05:00.0: {2}[Hardware Error]: aca entry[00].STATUS=0x1\n",
        Category.GPU_HARDWARE,
    ),
    "tpu_fatal_interrupt": (
        "E0101 00:00:00.000000  1201 error_handler.cc:100] Received Error Interrupt! fatal: "
        "true, running_timer: 0x1f\n",
        Category.GPU_HARDWARE,
    ),
    "loss_scale_floor_in_decimal": (
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.0004\n"
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.0002\n"
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.0001\n",
        Category.APPLICATION,
    ),
    "user_program_missing_stays_the_platform": (
        "slurmstepd: error: execve(): torchrun: No such file or directory\n"
        "srun: error: gpu-4: task 0: Exited with exit code 2\n",
        Category.SYSTEM_SOFTWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_mechanism_names_its_category(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure, name
    assert verdict.category is category, verdict.basis


HEALTHY: dict[str, str] = {
    "slurm_prolog_configured_and_ran": (
        "[2024-03-01T10:00:00.100] debug:  [job 77] attempting to run prolog "
        "[/etc/slurm/prolog.sh]\n"
        "[2024-03-01T10:00:00.400] debug:  completed prolog for job 77\n"
    ),
    "c10d_ipv6_lookup_warning_then_training": (
        "[W socket.cpp:601] [c10d] The IPv6 network addresses of (node1, 29500) cannot be "
        "retrieved (gai error: -9 - Address family for hostname not supported).\n"
        "epoch 0 step 10 loss 2.31\n"
        "epoch 0 step 20 loss 2.05\n"
    ),
    "fan_fault_cleared_and_sensor_rows": (
        "2023-01-01 10:00:00; ENC_MGT; env_control; 02; Fan 1 Fault OFF\n"
        "Fan tacho 1 is now: OK\n"
        "FAN1             | 5400 RPM          | ok\n"
    ),
    "horovod_normal_progress": (
        "[1,0]<stdout>:Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.3\n"
        "[1,0]<stdout>:Train Epoch: 1 [640/60000 (1%)]\tLoss: 1.9\n"
    ),
    "loss_scale_adjusting_early": (
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
        "| WARNING: overflow detected, setting loss scale to: 0.0625\n"
        "epoch 1 step 100 loss 3.2\n"
    ),
    "amdgpu_correctable_errors_only": (
        "[  55.1] amdgpu 0000:c1:00.0: amdgpu: 1 correctable hardware errors detected in umc "
        "block\n"
    ),
    "libfabric_cxi_service_in_use": (
        "libfabric:4411:1700000000::cxi:core:cxip_gen_auth_key():310<info> using CXI service 1 "
        "with VNI 10\n"
        "NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)\n"
    ),
    "rccl_opening_lines_only": (
        "node-a:1201:1201 [0] NCCL INFO RCCL version 2.18.3+hip6.0\n"
        "node-a:1201:1201 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens1\n"
        "node-a:1201:1201 [0] NCCL INFO NET/Socket : Using [0]ens1:10.0.0.5<0>\n"
        "node-b:2202:2202 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens1\n"
        "node-b:2202:2202 [0] NCCL INFO NET/Socket : Using [0]ens1:10.0.0.6<0>\n"
    ),
    "nccl_plugin_fallback_then_nothing": (
        "host1:77:77 [3] NCCL INFO Bootstrap : Using eth0:192.168.1.3<0>\n"
        "host1:77:77 [3] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.\n"
        "host1:77:77 [3] NCCL INFO cudaDriverVersion 12040\n"
    ),
    "all_gather_rows_and_clean_teardown": (
        "     1048576        262144     float    none      -1    41.20   25.45   22.27      0"
        "    40.80   25.70   22.49      0\n"
        "gpu3:9911:9930 [0] NCCL INFO comm 0x7f00aa00 rank 0 nranks 8 cudaDev 0 busId 1b000 "
        "- Destroy COMPLETE\n"
        "gpu3:9911:9931 [1] NCCL INFO comm 0x7f00ab00 rank 1 nranks 8 cudaDev 1 busId 1c000 "
        "- Destroy COMPLETE\n"
        "# Avg bus bandwidth    : 21.3\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_output_is_no_failure(tmp_path: Path, name: str) -> None:
    assert _verdict(tmp_path, HEALTHY[name]).kind is Kind.NONE


def test_log_ending_among_channel_setup_is_still_a_hang(tmp_path: Path) -> None:
    text = (
        "n1:10:10 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0\n"
        "n1:10:40 [0] NCCL INFO comm 0x55aa rank 0 nranks 16 cudaDev 0 busId 7000 - Init START\n"
        "n1:10:40 [0] NCCL INFO Channel 00/02 :    0   1   2   3\n"
        "n1:10:40 [0] NCCL INFO Channel 00/0 : 0[7000] -> 1[8000] via P2P/IPC\n"
    )
    verdict = _verdict(tmp_path, text)
    assert verdict.kind is Kind.HANG
    assert verdict.category is Category.SYSTEM_SOFTWARE
