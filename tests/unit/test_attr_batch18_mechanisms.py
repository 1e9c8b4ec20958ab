"""Mechanisms batch18 and batch19 taught, each tested on lines in other shapes (or other tools)
than the batches', and on healthy lines of the same kind, which must stay as they were.

Registering a buffer with the network failed, in a plugin's words (aws-ofi-nccl, UCX) as much
as in IB verbs': the locked-memory limit or the peer-memory module (system_software). A
framework built without the backend it was asked for, or without kernels for this GPU's
compute capability, is the installation's (system_software). No CI executor matching the
job's labels is online: the pool's capacity, the job waits (scheduler). In torchrun's table a
SIGKILL in the same second as another child's exit 1 came first: torchrun's own teardown
sends SIGTERM, so the SIGKILL came from outside (the host OOM killer: application).

Before the change six FAILURES cases fell to another category (UCX's registration to
network_hardware, the MPI and Paddle builds to application, PyTorch's capability warning and
Azure's queue to other guesses, the SIGKILL table to system_software through the exit-1 rank),
and the other three were right only as guesses below 0.3 (test_the_catalogue_knows_the_
mechanism failed for them); the HEALTHY cases were healthy before and must stay so, and a
SIGKILL after torchrun's grace period still leaves the exit-1 rank as the first failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import family_test, healthy_test
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

_STEPS = "".join(f"step {s} loss {2.0 - s / 1000:.3f}\n" for s in range(1, 13))


def _torchrun_table(kill_time: str) -> str:
    """torch 2.x's failure table: rank 5 exits 1 at 10:41:07, rank 4 is SIGKILLed at
    ``kill_time``; torchrun's Root Cause names rank 4."""
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "pretrain.py FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n"
        "[1]:\n"
        "  time      : 2025-03-02_10:41:07\n"
        "  host      : node-b\n"
        "  rank      : 5 (local_rank: 1)\n"
        "  exitcode  : 1 (pid: 2201)\n"
        "  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        f"  time      : {kill_time}\n"
        "  host      : node-b\n"
        "  rank      : 4 (local_rank: 0)\n"
        "  exitcode  : -9 (pid: 2200)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 2200\n"
        "============================================================\n"
    )


FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # aws-ofi-nccl (EFA) refusing to register a buffer: the OFI plugin's own words
    "ofi_unable_to_register_memory": (
        "ip-10-0-1-7:4121:4188 [3] NCCL WARN NET/OFI Unable to register memory (type = 1) for "
        "device 0. RC: -12, Error: Cannot allocate memory\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # UCX's verbs call with its arguments printed between the parentheses
    "ucx_reg_mr_with_arguments": (
        "[1733412201.412] [gpu-c04:8812:0] ib_md.c:349 UCX ERROR ibv_reg_mr(address=0x7f2a40000000,"
        " length=268435456, access=0xf) failed: Cannot allocate memory\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a collective library failing to register a communication buffer with its transport
    "register_comm_buffer_failed": (
        "2025-05-03 11:02:17 ERROR [hccl] Failed to register communication buffer, ret=-1\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # PyTorch's MPI backend, left out of every pip wheel
    "torch_mpi_not_built_in": (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\n'
        '    dist.init_process_group("mpi")\n'
        "RuntimeError: Distributed package doesn't have MPI built in. MPI is only included if "
        "you build PyTorch from source on a host that has MPI installed.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # Paddle's CPU-only wheel asked for a GPU place (its Unavailable error, a RuntimeError)
    "paddle_cpu_only_build": (
        "RuntimeError: (Unavailable) Cannot use CUDAPlace in CPU only version, Please "
        "recompile or reinstall Paddle with CUDA support.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # PyTorch's start-up warning for a GPU newer than the wheel's architectures
    "torch_capability_not_in_build": (
        "UserWarning: \nNVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible "
        "with the current PyTorch installation.\nThe current PyTorch install supports CUDA "
        "capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # GitLab's and Azure Pipelines' words for a queue no executor with the labels serves
    "gitlab_no_runner_with_tags": (
        "This job is stuck because you don't have any active runners online or available with "
        "any of these tags assigned to them: a100, cuda12\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "azure_no_agent_with_demands": (
        "##[error]No agent found in pool gpu-pool which satisfies the specified demands: "
        "cuda, Agent.OS -equals Linux\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    # the SIGKILL and the exit 1 in the same second: the kill came first
    "torchrun_sigkill_same_second_as_exit_1": (
        _torchrun_table("2025-03-02_10:41:07"),
        Category.APPLICATION,
        Kind.CRASH,
    ),
}

HEALTHY: dict[str, str] = {
    # NCCL's and UCX's start-up lines about registration that succeeded or is configured
    "registration_info_lines": (
        "gpu-a:410:455 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
        "gpu-a:410:455 [0] NCCL INFO NET/OFI Using CUDA driver version 12040 with runtime 12040\n"
        "gpu-a:410:455 [0] NCCL INFO Registered buffer 0x7f2a40000000 size 268435456\n" + _STEPS
    ),
    # the framework naming the architectures it was built for, this GPU among them
    "build_info_matching_gpu": (
        "W0120 16:56:34.715462 106570 gpu_resources.cc:119] Please NOTE: device: 0, GPU "
        "Compute Capability: 8.0, Driver API Version: 12.2, Runtime API Version: 11.8\n"
        "PyTorch built with: CUDA 12.4, cuDNN 9.1, arch list sm_80 sm_90\n" + _STEPS
    ),
    # a CI job that found its runner and ran
    "ci_runner_found": (
        "Waiting for a runner to pick up this job...\n"
        "Job is about to start running on the runner: gpu-runner-7 (repository)\n" + _STEPS
    ),
}


test_mechanism_names_its_category = family_test(FAILURES)


test_healthy_lines_stay_healthy = healthy_test(HEALTHY)


# named before only by the guessing layers (below 0.3); now by a catalogue line
_BY_THE_CATALOGUE = (
    "ofi_unable_to_register_memory",
    "register_comm_buffer_failed",
    "gitlab_no_runner_with_tags",
    "azure_no_agent_with_demands",
    "torch_mpi_not_built_in",
)


@pytest.mark.parametrize("name", _BY_THE_CATALOGUE)
def test_the_catalogue_knows_the_mechanism(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, FAILURES[name][0])
    assert verdict.basis.startswith("catalogue:"), (name, verdict.basis)
    assert verdict.confidence >= 0.5, (name, verdict)


def test_a_sigkill_after_the_grace_period_is_torchruns_teardown(tmp_path: Path) -> None:
    # 35 s after rank 5's exit 1: torchrun escalating its own SIGTERM, not the first failure
    verdict = _verdict(tmp_path, _torchrun_table("2025-03-02_10:41:42"))
    assert verdict.failure
    assert "SIGKILLed first" not in verdict.basis, verdict
    assert tuple(verdict.implicated.ranks) == (5,), verdict


def test_a_sigkill_in_the_same_second_names_the_killed_rank(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, FAILURES["torchrun_sigkill_same_second_as_exit_1"][0])
    assert tuple(verdict.implicated.ranks) == (4,), verdict
    # a guess about the OOM killer: restart, never stop or drain
    assert verdict.confidence < 0.5, verdict
