"""The message families refset_sys taught, each tested on a member the set does not hold
(another daemon, another wording, another tool), and on healthy lines that share their words.

A process/thread limit is the environment's; the MPI runtime failing to start is the software
stack; every network file-system client that stops hearing its server is storage; HDFS that
cannot place a block is storage; a cloud's GPU quota or capacity refusal is the scheduler's
provisioning; shape errors in NumPy's words are the application's; a loss scale driven to 0
is a diverged run; a task blocked inside the GPU driver is the driver's (a guess, 0.3); a
quota that was not hit and NCCL's optional plugin probe are no failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category

FAILURES: dict[str, tuple[str, Category]] = {
    "pmix_unreachable": (
        "step 10 | loss 2.1\n"
        "[gpu-n3:771] PMIX ERROR: UNREACHABLE in file server/pmix_server.c at line 2198\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "intel_mpi_pmpi_init": (
        "Abort(1091215) on node 3 (rank 3 in comm 0): Fatal error in PMPI_Init: "
        "Other MPI error, error stack:\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "shell_fork_limit": (
        "bash: fork: retry: Resource temporarily unavailable\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "statd_not_responding": (
        "statd: server 10.0.0.9 not responding, timed out\n",
        Category.STORAGE,
    ),
    "numpy_broadcast": (
        "ValueError: operands could not be broadcast together with shapes (32,10) (64,10) \n",
        Category.APPLICATION,
    ),
    "loss_scale_to_zero": (
        "NOTE: gradient overflow detected, reducing loss scale to 0\n",
        Category.APPLICATION,
    ),
    "hdfs_min_replication": (
        "org.apache.hadoop.ipc.RemoteException(java.io.IOException): File /ckpt/x could only "
        "be written to 0 of the 1 minReplication nodes. There are 0 datanode(s) running.\n",
        Category.STORAGE,
    ),
    "gcp_gpu_quota": (
        "googleapiclient.errors.HttpError: <HttpError 403 when requesting "
        "https://compute.googleapis.com returned \"Quota 'NVIDIA_H100_GPUS' exceeded.  "
        'Limit: 0.0 in region us-east4.">\n',
        Category.SCHEDULER,
    ),
    "hung_task_in_uvm": (
        "[  812.201] INFO: task python:4412 blocked for more than 122 seconds.\n"
        "[  812.301] Call Trace:\n"
        "[  812.401]  uvm_va_block_make_resident+0x1d/0x30 [nvidia_uvm]\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "s3_service_unavailable": (
        "botocore.exceptions.ClientError: An error occurred (ServiceUnavailable) when calling "
        "the PutObject operation (reached max retries: 4): Service Unavailable\n",
        Category.STORAGE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_family_member_named(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.category is category, (name, verdict)


def test_driver_hang_is_a_guess(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, FAILURES["hung_task_in_uvm"][0])
    assert verdict.confidence < 0.5


HEALTHY = {
    "quota_not_hit": (
        "Mar 12 03:14:07 gpu-n3 kernel: EXT4-fs (sda1): mounted filesystem with ordered data "
        "mode. Quota mode: none.\n"
        "Disk quotas for usr alice (uid 1000):\n"
        "Resource Quotas\n"
    ),
    "nccl_plugin_probe": (
        "gpu-n17:48812:48812 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: "
        "cannot open shared object file: No such file or directory : when loading "
        "libnccl-net.so\n"
        "gpu-n17:48812:48812 [0] NCCL INFO NET/Plugin: Using internal network plugin.\n"
        "step 10 | loss 2.1\n"
    ),
    "nccl_topo_file_set": (
        "gpu-n17:1:2 [0] NCCL INFO NCCL_TOPO_FILE set by environment to /opt/topo.xml\n"
        "step 10 | loss 2.1\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_family_words_in_healthy_output(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert not verdict.failure, (name, verdict)
