"""Mechanisms batch07 taught, each tested on lines in other shapes than the batch's (other
schedulers, libraries, vendors and wordings of the same mechanism), with healthy counter-cases
that must stay "no failure".

* A submission refused before anything ran (Slurm's clients, PBS/Torque, LSF, HTCondor, Flux,
  a Kubernetes quota or admission webhook, Kueue): the scheduler.
* A queue pair that cannot be moved to a connected state (RTR/RTS) times out or finds the
  network unreachable: no route between the two NICs as configured (rails, GID index,
  subnets): the platform's configuration, not a failing link.
* A non-maskable interrupt the platform raised for a hardware fault (firmware logs, the
  kernel's unknown-reason / SERR / IOCK NMIs): the server.
* A remote file system or object-store client that gave up (fsspec, botocore, the Google and
  Azure storage clients): storage.
* A server part over its temperature limit, a failed temperature sensor, "Node 0 Failed"
  (a part named by its number is not a zero count): the node.
* A log that stops half-way through saying something: a traceback cut before its exception
  line (the program's frames: application; a wait on another process: unknown) and a
  submission whose last words are that it waits for its allocation (a scheduler hang).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

FAILURES: dict[str, tuple[str, Category]] = {
    "salloc_invalid_partition": (
        "salloc: error: Invalid partition name specified\n",
        Category.SCHEDULER,
    ),
    "srun_invalid_account": (
        "srun: error: Invalid account or account/partition combination specified\n",
        Category.SCHEDULER,
    ),
    "sbatch_site_policy_via_wrapper": (
        "submitit.core.utils.FailedJobError: sbatch: error: Please request GPUs with --gpus, "
        "--gres is disabled on this cluster\n",
        Category.SCHEDULER,
    ),
    "pbs_unknown_resource": ("qsub: Unknown resource: ngpus\n", Category.SCHEDULER),
    "torque_submit_filter": (
        "Must request at least one GPU to use the gpu queue!\n"
        "qsub: submit filter returned an error code, aborting job submission.\n",
        Category.SCHEDULER,
    ),
    "lsf_not_submitted": (
        "Bad resource requirement syntax. Job not submitted.\n",
        Category.SCHEDULER,
    ),
    "kubernetes_quota": (
        'Error from server (Forbidden): pods "trainer-0" is forbidden: exceeded quota: '
        "team-gpus, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, "
        "limited: requests.nvidia.com/gpu=16\n",
        Category.SCHEDULER,
    ),
    "kueue_flavors": (
        "Warning  Pending  3m  kueue-admission  couldn't assign flavors to pod set main: "
        "insufficient quota for nvidia.com/gpu in flavor h100, 16 more needed\n",
        Category.SCHEDULER,
    ),
    "qp_rtr_timeout_other_library": (
        "RoCE detected (Ethernet)\nFailed to modify QP to RTR: Connection timed out\nerrno: 110\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "qp_network_unreachable": (
        "dgx-4:460770:460842 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed "
        "with error Network is unreachable\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "kernel_unknown_nmi": (
        "[88211.4412] Uhhuh. NMI received for unknown reason 2d on CPU 17.\n"
        "[88211.4413] Do you have a strange power saving mode enabled?\n",
        Category.NODE_HARDWARE,
    ),
    "idrac_bus_fatal_nmi": (
        "PCI1308: A bus fatal error was detected on a component at bus 59 device 0 function 0. "
        "A non-maskable interrupt was generated.\n",
        Category.NODE_HARDWARE,
    ),
    "kernel_serr_nmi": (
        "kernel: NMI: PCI system error (SERR) for reason b1 on CPU 0.\n",
        Category.NODE_HARDWARE,
    ),
    "botocore_stream_broken": (
        "botocore.exceptions.ResponseStreamingError: An error occurred while reading from "
        "response stream: ('Connection broken: IncompleteRead(0 bytes read, 65536 more "
        "expected)', IncompleteRead(0 bytes read, 65536 more expected))\n",
        Category.STORAGE,
    ),
    "gcs_backend_error": (
        "google.api_core.exceptions.ServiceUnavailable: 503 GET https://storage.googleapis.com/"
        "download/storage/v1/b/corpus/o/part-0007?alt=media: Backend Error\n",
        Category.STORAGE,
    ),
    "azure_blob_connection": (
        "azure.core.exceptions.ServiceResponseError: ('Connection aborted.', "
        "ConnectionResetError(104, 'Connection reset by peer'))\n",
        Category.STORAGE,
    ),
    "processor_thermal_trip": ("Processor 2 thermal trip\n", Category.NODE_HARDWARE),
    "ipmi_upper_critical": (
        "Proc 1 Temp | Upper Critical going high | Asserted\n",
        Category.NODE_HARDWARE,
    ),
    "chassis_node_zero_failed": (
        "Severity    : Major\nMessage     : Node 0 Failed (Node Shutdown by Thermal Protection)\n",
        Category.NODE_HARDWARE,
    ),
    "cut_traceback_in_model_code": (
        "Epoch 3: 41%|####      | 410/1000\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/project/train.py", line 88, in <module>\n'
        "    main()\n"
        '  File "/opt/project/models/encoder.py", line 41, in forward\n'
        "    h = self.proj(x).view(b, t, -1)\n",
        Category.APPLICATION,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_mechanism(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure, name
    assert verdict.category is category, (name, verdict.category, verdict.basis)


def test_cut_traceback_waiting_on_a_child_is_a_failure_of_unknown_cause(tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "/srv/run.py", line 12, in <module>\n'
        "    results = list(pool.map(work, shards))\n"
        '  File "/usr/lib/python3.11/concurrent/futures/process.py", line 620, in '
        "_chain_from_iterable_of_lists\n"
        "    for element in iterable:\n",
    )
    assert verdict.failure
    assert verdict.category is Category.UNKNOWN
    assert verdict.confidence < 0.5


@pytest.mark.parametrize(
    "text",
    [
        "salloc: Pending job allocation 881\nsalloc: job 881 queued and waiting for resources\n",
        "$ qsub -I -l select=2:ngpus=4 -q gpu\nqsub: waiting for job 3321.pbs01 to start\n",
        "Job <5512> is submitted to queue <gpu>.\n<<Waiting for dispatch ...>>\n",
    ],
)
def test_allocation_never_granted_is_a_scheduler_hang(tmp_path: Path, text: str) -> None:
    verdict = _verdict(tmp_path, text)
    assert verdict.failure
    assert verdict.category is Category.SCHEDULER
    assert verdict.kind is Kind.HANG
    assert verdict.confidence < 0.5


HEALTHY: dict[str, str] = {
    "submitted": "Submitted batch job 4412\n",
    "allocation_granted_then_trained": (
        "salloc: Pending job allocation 881\n"
        "salloc: job 881 queued and waiting for resources\n"
        "salloc: job 881 has been allocated resources\n"
        "salloc: Granted job allocation 881\n"
        + "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(30))
    ),
    "lsf_dispatched": (
        "Job <5512> is submitted to queue <gpu>.\n<<Waiting for dispatch ...>>\n"
        "<<Starting on gpu-a07>>\n" + "".join(f"iter {i} loss 1.{i:02d}\n" for i in range(25))
    ),
    "traceback_closed_then_output": (
        "Traceback (most recent call last):\n"
        '  File "/opt/project/data.py", line 40, in __iter__\n'
        "    yield next(self.it)\n"
        "StopIteration\n"
        "end of epoch 3, restarting the data iterator\n"
    ),
    "zero_failed_summary": "Ran 12 checks: 12 passed, 0 failed\n",
    "sensor_readings_ok": (
        "CPU1 Temp        | 45 degrees C      | ok\nInlet Temp | 22 degrees C | ok\n"
    ),
    "thresholds_beside_readings": (
        "CPU2 Temp: 61 C (Upper Critical threshold 95 C)\n Upper critical        : 95.000\n"
    ),
    "healthy_slurm_job": (
        "srun: Pending job allocation 4412\n"
        "srun: job 4412 has been allocated resources\n"
        "NodeName=gpu-07 State=ALLOCATED Reason=(null)\n"
        "/etc/profile.d/lmod.sh: line 12: /opt/lmod/init: No such file or directory\n"
        "gpu-07:1:1 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0,mlx5_1\n"
        + "".join(f"step {i} loss {2.3 - i / 100:.2f} tokens/s 51234\n" for i in range(25))
        + "eval: accuracy 0.41, errors=0, failed 0 of 512 samples\n"
        "Training completed. Total time 00:31:02\n"
    ),
    "nmi_watchdog_enabled": "NMI watchdog: Enabled. Permanently consumes one hw-PMU counter.\n",
    "storage_client_info": (
        "botocore.credentials - INFO - Found credentials in environment variables.\n"
        "INFO fsspec: using s3fs 2024.3.1 for s3:// paths\n"
    ),
    "qp_connected_then_trained": (
        "gpu-3:12:40 [0] NCCL INFO NET/IB: Dev 0 Port 1 qpn 1047 mtu 5 GID 3 modify QP to RTS\n"
        "gpu-3:12:40 [0] NCCL INFO Connected all rings\n"
        + "".join(f"step {i} loss {3.0 - i / 50:.3f}\n" for i in range(25))
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_counter_case(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert not verdict.failure, (name, verdict.category, verdict.basis)
