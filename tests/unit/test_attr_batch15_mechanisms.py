"""Mechanisms batch15 taught, each tested on lines in other shapes (or other tools) than the
batch's, and on healthy lines of the same kind, which must stay as they were.

A GPU whose NVLink status listing shows links down while links of the listing are up lost
NVLinks (gpu_hardware, a straggler, a guess). A device driver refusing to bind with EINVAL is a
driver/firmware mismatch (system_software, a guess). A connection that is not a collective
library's own on its listening socket is the library's accept path (system_software, a guess).
A runtime that spent every retry of its start-up queries to the instance metadata service
waits for the platform (system_software). A loss scaler that overflows at a floor of 1 or less
and cannot lower its scale has diverged (application). A cloud project's compute quota spent
refuses the job at admission (scheduler).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import family_test, healthy_test
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind


def _smi_nvlink(gpus: dict[int, list[str | None]]) -> str:
    """``nvidia-smi nvlink -s``: one block per GPU, a link's speed or ``<inactive>``."""
    out = []
    for gpu, links in gpus.items():
        out.append(f"GPU {gpu}: NVIDIA A100-SXM4-80GB (UUID: GPU-{gpu:08x}-aaaa-bbbb)\n")
        for n, speed in enumerate(links):
            out.append(f"\t Link {n}: {speed if speed else '<inactive>'}\n")
    return "".join(out)


_DCGMI_HEAD = (
    "+----------------------+\n|  NvLink Link Status  |\n+----------------------+\nGPUs:\n"
)
_DCGMI_KEY = "Key: Up=U, Down=D, Disabled=X, Not Supported=_\n"

FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # DCGM's listing: one letter per link, GPU 1 has two links down
    "dcgmi_nvlink_links_down": (
        _DCGMI_HEAD + "    gpuId 0:\n        U U U U U U U U U U U U\n"
        "    gpuId 1:\n        U U D U U U U D U U U U\n" + _DCGMI_KEY,
        Category.GPU_HARDWARE,
        Kind.STRAGGLER,
    ),
    # nvidia-smi: every link of GPU 1 inactive while GPU 0's are up
    "nvidia_smi_one_gpu_without_links": (
        _smi_nvlink({0: ["25 GB/s"] * 12, 1: [None] * 12}),
        Category.GPU_HARDWARE,
        Kind.STRAGGLER,
    ),
    "amdgpu_probe_einval": (
        "[    9.101220] amdgpu 0000:c1:00.0: amdgpu: Fetched VBIOS from VFCT\n"
        "[    9.118101] amdgpu 0000:c1:00.0: amdgpu: early_init of IP block <psp> failed -22\n"
        "[    9.118820] amdgpu: probe of 0000:c1:00.0 failed with error -22\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "ice_probe_einval": (
        "[    6.402911] ice 0000:17:00.0: ice_init_hw failed: -22\n"
        "[    6.403015] ice: probe of 0000:17:00.0 failed with error -22\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # RCCL: another library's connection (wrong socket type) on the bootstrap socket
    "rccl_foreign_connection_wrong_type": (
        "node-b:2201:2219 [3] NCCL INFO Bootstrap : Using ens8f0:10.1.0.4<0>\n"
        "node-b:2201:2219 [3] misc/socket.cc:461 NCCL WARN socketFinalizeAccept: wrong type"
        " 3 != 4\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "mscclpp_foreign_connection": (
        "[MSCCLPP WARN] finalizeAccept: wrong magic 474554202f20485454 != 3f2a7d1c9e0b5a61\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "libtpu_topology_from_metadata_failed": (
        "E0105 10:01:02.000000 5511 tpu_env.cc:88] Failed to get TPU metadata (tpu-env) from"
        " instance metadata for variable CHIPS_PER_HOST_BOUNDS: INTERNAL: Couldn't connect to"
        " server\n",
        Category.SYSTEM_SOFTWARE,
        Kind.STRAGGLER,
    ),
    "google_auth_metadata_retries_spent": (
        "WARNING:google.auth.compute_engine._metadata:Compute Engine Metadata server "
        "unavailable on attempt 1 of 3. Reason: timed out\n"
        "WARNING:google.auth.compute_engine._metadata:Compute Engine Metadata server "
        "unavailable on attempt 2 of 3. Reason: timed out\n"
        "WARNING:google.auth.compute_engine._metadata:Compute Engine Metadata server "
        "unavailable on attempt 3 of 3. Reason: timed out\n",
        Category.SYSTEM_SOFTWARE,
        Kind.STRAGGLER,
    ),
    # DeepSpeed's fused fp16 optimizer at min_loss_scale 1, still overflowing
    "deepspeed_fused_overflow_at_floor": (
        "[2024-03-02 11:20:01,311] [INFO] [fused_optimizer.py:345:_update_scale] \n"
        "Grad overflow on iteration 88120\n"
        "[2024-03-02 11:20:01,312] [INFO] [logging.py:96:log_dist] [Rank 0] [deepspeed] "
        "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "gcp_gpu_quota_metric": (
        "google.api_core.exceptions.ResourceExhausted: 429 Quota exceeded for quota metric "
        "'Custom model training Nvidia A100 GPUs' and limit 'Custom model training Nvidia A100 "
        "GPUs per region' of service 'aiplatform.googleapis.com' for consumer 'project_number:"
        "1234'.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "azure_cores_quota": (
        '{"code": "OperationNotAllowed", "message": "Operation could not be completed as it '
        "results in exceeding approved standardNCADSA100v4Family Cores quota. Additional "
        'details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 0"}\n',
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "sagemaker_instance_limit": (
        "botocore.exceptions.ClientError: An error occurred (ResourceLimitExceeded) when "
        "calling the CreateTrainingJob operation: The account-level service limit "
        "'ml.p4d.24xlarge for training job usage' is 0 Instances, with current utilization of "
        "0 Instances and a request delta of 2 Instances.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
}


test_mechanism_names_its_category = family_test(FAILURES)


@pytest.mark.parametrize(
    "name",
    ["dcgmi_nvlink_links_down", "amdgpu_probe_einval", "rccl_foreign_connection_wrong_type"],
)
def test_guesses_stay_below_the_stop_threshold(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, FAILURES[name][0])
    assert verdict.confidence < 0.5, (name, verdict)


HEALTHY: dict[str, str] = {
    "nvidia_smi_all_links_up": _smi_nvlink({0: ["25 GB/s"] * 12, 1: ["25 GB/s"] * 12}),
    # PCIe cards without an NVLink bridge: no link of any GPU is up
    "nvidia_smi_no_bridge_on_any_gpu": _smi_nvlink({0: [None] * 4, 1: [None] * 4}),
    # disabled links (X) are the platform's layout, not links that went down
    "dcgmi_links_up_and_disabled": (
        _DCGMI_HEAD + "    gpuId 0:\n        U U U U X X\n    gpuId 1:\n        U U U U X X\n"
        "NvSwitches:\n    physicalId 8:\n        U U X X U U\n" + _DCGMI_KEY
    ),
    "mlx5_boot_adjusting_a_profile": (
        "[   12.925245] mlx5_core 0000:03:00.0: enabling device (0000 -> 0002)\n"
        "[   12.926115] mlx5_core 0000:03:00.0: firmware version: 16.35.2000\n"
        "[   13.661500] mlx5_core 0000:03:00.0: E-Switch: Total vports 2, per vport: max uc(128)"
        " max mc(2048)\n"
        "[   13.902210] mlx5_core 0000:03:00.0: Port module event: module 0, Cable plugged\n"
    ),
    "nccl_bootstrap_opening": (
        "node-b:2201:2219 [3] NCCL INFO Bootstrap : Using ens8f0:10.1.0.4<0>\n"
        "node-b:2201:2219 [3] NCCL INFO comm 0x55d0 rank 3 nranks 8 cudaDev 3 busId 41000 - "
        "Init COMPLETE\n" + "".join(f"step {s} loss {2.0 - s / 1000:.3f}\n" for s in range(1, 13))
    ),
    # the library dropped the stranger and accepted again (its design): training went on
    "foreign_connection_then_training": (
        "node-b:2201:2219 [3] misc/socket.cc:484 NCCL WARN socketFinalizeAccept: wrong magic "
        "474554202f20485454 != 3f2a7d1c9e0b5a61\n"
        + "".join(f"step {s} loss {2.0 - s / 1000:.3f}\n" for s in range(1, 41))
    ),
    # one retry of the metadata fetch, then the TPU came up
    "metadata_retry_then_devices": (
        "I0000 00:00:1676990884.185389      14 common_lib.cc:145] Failed to fetch URL on try 1 "
        "out of 6: Timeout was reached\n"
        "[TpuDevice(id=0, process_index=0, coords=(0,0,0), core_on_chip=0), "
        "TpuDevice(id=1, process_index=0, coords=(0,0,0), core_on_chip=1)]\n"
    ),
    "deepspeed_overflow_probing_then_training": (
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to "
        "32768\n" + "".join(f"step {s} loss {2.0 - s / 1000:.3f}\n" for s in range(100, 112))
    ),
    # a floor set high: one overflow there is the scaler probing, and training goes on
    "deepspeed_overflow_at_a_high_floor": (
        "Reducing dynamic loss scale from 1024 to 1024\n"
        + "".join(f"step {s} loss {2.0 - s / 1000:.3f}\n" for s in range(100, 112))
    ),
    "gcloud_quota_listing": (
        "quotas:\n- limit: 16.0\n  metric: NVIDIA_A100_GPUS\n  usage: 8.0\n"
        "- limit: 24.0\n  metric: CPUS\n  usage: 12.0\n"
    ),
}


test_healthy_lines_stay_healthy = healthy_test(HEALTHY)
