"""Mechanisms batch12 taught, each tested on lines in other shapes than the batch's, and on
healthy lines of the same kind, which must stay as they were.

A GPU that hung (an amdgpu ring or fence timeout, a driver reset, the MES/HWS firmware
scheduler not answering) is a restart-level guess unless a hardware-error record or a failed
reset stands beside it; a segfault inside a driver's or communication library's code is the
platform's; a GPFS client that is not up is storage; an oops/WARN register dump inside a
loadable module is the driver's; a framework built without the transport it was asked for and
a kernel launched with an impossible geometry are the software stack's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category

FAILURES: dict[str, tuple[str, Category, float]] = {
    "compute_ring_timeout_alone_is_a_guess": (
        "[ 4410.2] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring comp_1.3.0 timeout, "
        "signaled seq=77, emitted seq=79\n"
        "[ 4410.3] amdgpu 0000:83:00.0: amdgpu: GPU reset begin!\n",
        Category.APPLICATION,
        0.45,
    ),
    "reset_beside_ras_record_stays_the_gpu": (
        "[ 90.1] amdgpu 0000:83:00.0: amdgpu: GPU reset begin!\n"
        "[ 90.2] amdgpu 0000:83:00.0: amdgpu: 1 uncorrectable hardware errors detected "
        "in umc block\n",
        Category.GPU_HARDWARE,
        0.85,
    ),
    "reset_that_failed_stays_the_gpu": (
        "[ 12.0] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=3, "
        "emitted seq=4\n"
        "[ 12.5] amdgpu 0000:03:00.0: amdgpu: ASIC reset failed with error, -110\n",
        Category.GPU_HARDWARE,
        0.7,
    ),
    "hws_hang_is_firmware": (
        "[ 311.7] amdgpu: HWS hang detected, resetting\n[ 311.8] amdgpu: Failed to evict queues\n",
        Category.SYSTEM_SOFTWARE,
        0.45,
    ),
    "smu_not_answering_is_a_gpu_guess": (
        "[ 5.1] amdgpu 0000:43:00.0: amdgpu: SMU: response timed out for msg 0x26\n",
        Category.GPU_HARDWARE,
        0.45,
    ),
    "segfault_in_nccl_library": (
        "step 40 loss 1.9\n"
        "kernel: python3[20211]: segfault at 0 ip 00007f11 sp 00007ffe error 6 in "
        "libnccl.so.2.21.5[7f1100000000+a000000]\n",
        Category.SYSTEM_SOFTWARE,
        0.45,
    ),
    "gpfs_daemon_down": (
        "mmgetstate: GPFS daemon is down on node gpu17\nls: cannot access '/gpfs/proj': "
        "No such file or directory\n",
        Category.STORAGE,
        0.8,
    ),
    "warn_inside_nic_driver_module": (
        "[ 77.1] WARNING: CPU: 3 PID: 901 at drivers/net/ethernet/mellanox/mlx5/core/cmd.c:1201 "
        "mlx5_cmd_exec+0x3a/0x60 [mlx5_core]\n",
        Category.SYSTEM_SOFTWARE,
        0.8,
    ),
    "framework_built_without_backend": (
        "[E 10:02:11 launcher.cc:88] transport init: this build was compiled without gloo "
        "support, aborting\n",
        Category.SYSTEM_SOFTWARE,
        0.8,
    ),
    "cuda_invalid_configuration": (
        "torch.AcceleratorError: CUDA error: invalid configuration argument\n",
        Category.SYSTEM_SOFTWARE,
        0.45,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_mechanism_names_its_category(tmp_path: Path, name: str) -> None:
    text, category, confidence = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure, name
    assert verdict.category is category, (name, verdict.basis)
    assert verdict.confidence == pytest.approx(confidence), (name, verdict.basis)


HEALTHY = {
    "mes_version_note": "amdgpu 0000:c5:00.0: amdgpu: MES FW version must be >= 0x7f to enable "
    "LR compute workaround.\nstep 10 loss 2.0\n",
    "gpfs_active": "mmgetstate -a\n Node number  Node name  GPFS state\n 1  gpu17  active\n",
    "user_space_rip": "RIP: 0033:0x7f3a2b1c4d5e\n",
    "built_with_cuda_banner": "[I] mxnet built with CUDA 12.1 and cuDNN 8.9\nepoch 1 loss 0.91\n",
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_lines_stay_healthy(tmp_path: Path, name: str) -> None:
    assert not _verdict(tmp_path, HEALTHY[name]).failure, name
