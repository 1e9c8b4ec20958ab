"""Mechanisms read after batch40..batch41's first sight: each a family of messages (other
tools' and versions' wordings of the same failure) with healthy or differently-caused
counter-cases, never one log's lines (the batches' own logs are scored by
test_attr_realworld's floors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import (
    assert_healthy,
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.model import Category, Kind

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a peer's CUDA IPC handle whose GPU this process cannot see (per-task GPU binding)
    "ipc_open_gtl": (
        "2: (GTL DEBUG: 2) cuIpcOpenMemHandle: invalid argument, CUDA_ERROR_INVALID_VALUE, "
        "line no 301\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "ipc_open_ucx": (
        "[1700000000.1] [gpu-9:4410:0] cuda_ipc_cache.c:185 UCX ERROR "
        "cuIpcOpenMemHandle((CUdeviceptr *)&key->d_bptr, key->ph, "
        "CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) failed: invalid device context\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # RDMA devices present, the stack's accelerated provider absent from the image
    "accelerated_ib_missing": (
        "2 IB device(s) were detected, but accelerated IB support was not found!\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "accelerated_verbs_unavailable": (
        "[rank3] transport: accelerated verbs support is not available in this build\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    # a Rust library called from Python panicked instead of returning its error
    "pyo3_panic": (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\n'
        "    tok = Tokenizer.from_file(path)\n"
        "pyo3_runtime.PanicException: called `Option::unwrap()` on a `None` value\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "rust_thread_panic": (
        "thread 'tokio-runtime-worker' panicked at src/client/put.rs:211:40:\n"
        "called `Result::unwrap()` on an `Err` value: InvalidConfig\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the verbs device is listed but may not be opened (container, permissions, provider)
    "nccl_open_device": (
        "host-2:71:71 [0] misc/ibvwrap.cc:198 NCCL WARN Call to ibv_open_device failed\n"
        "host-2:71:71 [0] NCCL INFO NET/IB : No device found.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "ucx_open_device": (
        "[1651:0:1651] ib_device.c:1024 UCX ERROR ibv_open_device(mlx5_3) failed: "
        "Permission denied\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # NCCL's socket layer: no interface reaches the peers' advertised addresses
    "nccl_no_subnet_iface": (
        "a1b2:900:900 [1] misc/socket.cc:240 NCCL WARN Net : No interface found in the same "
        "subnet as remote address 192.168.7.3<51020>\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "nccl_no_listen_iface": (
        "worker-0:12:12 [0] bootstrap.cc:44 NCCL WARN NET/Socket : No usable listening "
        "interface found\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # several ranks renaming one staging checkpoint directory on a shared file system
    "staging_rename_enoent": (
        '  File "trainer.py", line 2390, in _save_checkpoint\n'
        "    os.rename(staging_output_dir, output_dir)\n"
        "FileNotFoundError: [Errno 2] No such file or directory: '/shared/run7/tmp-checkpoint-"
        "3000' -> '/shared/run7/checkpoint-3000'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "staging_rename_not_empty": (
        "OSError: [Errno 39] Directory not empty: 'out/tmp-checkpoint-40' -> 'out/checkpoint-40'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the RDMA driver's record of a queue pair moved to error for what the sender posted
    "qp_error_local_length": (
        "[Mon Mar  3 01:02:03 2025] mlx5_2/1: QP 7781 error: local length error (0x8e 0x0 0x0)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "qp_error_remote_access": (
        "kernel: mlx5_bond_1/1: QP 0x3f2 error: remote access error (0x88 0x13 0x0)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # ENOLCK: the file system holding the lock file offers no locking
    "enolck_python": (
        '  File "/opt/env/lib/python3.10/site-packages/filelock/_unix.py", line 39, in '
        "_acquire\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "OSError: [Errno 37] No locks available\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "enolck_flock": (
        "flock: /nfs/home/u1/.cache/huggingface/datasets/_lock: No locks available\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # slurmd registered no GPU where the node declares some: detection, not eight broken GPUs
    "gres_zero_reason": (
        "NodeName=p5-st-1 State=IDLE+DRAIN Reason=gres/gpu count reported lower than "
        "configured (0 < 4) [slurm@2025-03-01T00:00:00]\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "gres_zero_typed_old": (
        "Reason=gres/gpu:a100 count too low (0 < 8)\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # some GPUs counted, fewer than declared: one dropped out of the driver's view
    "gres_short": (
        "Reason=gres/gpu count reported lower than configured (7 < 8)\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    # a health operator's node label recording a failed GPU memory test
    "autopilot_row_remap": (
        "Labels:  autopilot.ibm.com/dcgm.level.3=ERR_2025-06-01_01.02.03UTC_page_retirement_"
        "row_remap.5\n          autopilot.ibm.com/gpuhealth=EVICT\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    "autopilot_memory_bw": (
        "autopilot.ibm.com/dcgm.level.3=ERR_2025-02-11_21.00.17UTC_memory_bandwidth.3\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    "ipc_debug_ok": "(GTL DEBUG: 0) cuIpcOpenMemHandle: success, handle cached\n",
    "ib_devices_detected": "8 IB device(s) were detected\nusing mlx5 direct verbs\n",
    "rust_backtrace_hint": (
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"
    ),
    "nccl_socket_chosen": (
        "n1:5:5 [0] NCCL INFO NET/Socket : Using [0]eth0:10.2.0.4<0>\n"
        "n1:5:5 [0] NCCL INFO Bootstrap : Using eth0:10.2.0.4<0>\n"
    ),
    "autopilot_pass": (
        "autopilot.ibm.com/dcgm.level.3=PASS_2025-06-01_01.02.03UTC\n"
        "autopilot.ibm.com/gpuhealth=PASS\n"
    ),
    # IMEX runs only while a multi-node NVLink job holds the node: not ready on an idle node
    "imex_idle_dcgm": (
        "  ErrorCode:DCGM_FR_IMEX_UNHEALTHY GPU:2 PCI:0000:1b:00.0\n"
        "  GPU_UUID:GPU-0a1b IMEX daemon status is -1 (not READY)\n"
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize(
    "text",
    [
        # running out of memory while mapping a peer's buffer is the job's memory
        "(GTL DEBUG: 0) cuIpcOpenMemHandle: out of memory, CUDA_ERROR_OUT_OF_MEMORY\n",
        # an unnamed invalid argument is no IPC mapping
        "RuntimeError: CUDA error: invalid argument\n",
    ],
)
def test_other_cuda_errors_are_no_ipc_refusal(tmp_path: Path, text: str) -> None:
    assert "ipc_handle_refused" not in verdict_of(tmp_path, text).basis


def test_a_retry_exceeded_qp_error_stays_the_link(tmp_path: Path) -> None:
    """Retry counters exceeded are the link or the peer's NIC, not what the sender posted."""
    verdict = verdict_of(
        tmp_path, "mlx5_0/1: QP 1234 error: transport retry counter exceeded (0x81 0x15 0x0)\n"
    )
    assert verdict.category is not Category.SYSTEM_SOFTWARE, verdict


def test_a_verbs_call_failing_on_an_open_device_stays_the_link(tmp_path: Path) -> None:
    """Only opening the device is the node's set-up; a post on an opened one keeps its entry."""
    verdict = verdict_of(
        tmp_path,
        "g1:8:9 [0] NCCL WARN NET/IB : ibv_post_send failed with 110 Connection timed out\n",
    )
    assert "device_open_refused" not in verdict.basis, verdict


def test_a_missing_file_that_is_no_staging_rename_stays_the_job(tmp_path: Path) -> None:
    verdict = verdict_of(
        tmp_path,
        "FileNotFoundError: [Errno 2] No such file or directory: 'output/checkpoint-500/"
        "config.json'\n",
    )
    assert verdict.category is Category.APPLICATION, verdict


def test_a_busy_lock_is_no_missing_lock_support(tmp_path: Path) -> None:
    """EAGAIN on a non-blocking lock is another holder, not a file system without locks."""
    verdict = verdict_of(tmp_path, "BlockingIOError: [Errno 11] Resource temporarily unavailable\n")
    assert "locks_unavailable" not in verdict.basis, verdict


@pytest.mark.parametrize(
    "name",
    ["ipc_open_gtl", "pyo3_panic", "staging_rename_enoent", "gres_zero_reason", "gres_short"],
)
def test_guesses_stay_below_half(tmp_path: Path, name: str) -> None:
    """What the message usually means, not what it proves: restart, never stop or drain."""
    text, _, _ = _FAILURES[name]
    assert verdict_of(tmp_path, text).confidence < 0.5


def test_an_imex_failure_in_a_job_keeps_its_own_line(tmp_path: Path) -> None:
    """The idle daemon's status is context: a job that needed IMEX fails with its own line."""
    verdict = verdict_of(
        tmp_path,
        "IMEX daemon status is -3 (not READY)\n"
        "RuntimeError: CUDA error: operation not permitted when stream is capturing\n"
        "NCCL WARN Cuda failure 'invalid device context' in cuMulticastCreate\n",
    )
    assert verdict.failure, verdict


def _nccl_start(host: str, last: str) -> str:
    """NCCL's setup lines of one rank (NCCL_DEBUG=INFO), up to ``last``."""
    head = f"{host}:31:44 [0] NCCL INFO "
    return (
        f"{head}Using network IB\n"
        f"{head}comm 0x55d0 rank 0 nranks 4 cudaDev 0 busId 1b000 - Init START\n"
        f"{head}Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1\n"
        f"{head}Channel 00/02 :    0   1   2   3\n"
        f"{head}{last}\n"
    )


@pytest.mark.parametrize(
    "last",
    [
        "Channel 00/0 : 3[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
        "Ring 01 : 2 -> 0 [receive] via NET/Socket/1",
        "Connected all rings",
    ],
)
def test_an_excerpt_cut_after_a_network_connection_is_no_setup_stall(
    tmp_path: Path, last: str
) -> None:
    """A channel that connected between the nodes with no warning says the transport worked:
    a log ending there is an excerpt of a start, not the ranks failing to connect."""
    assert_healthy(tmp_path, last, _nccl_start("gpu-a7", last))


@pytest.mark.parametrize(
    "extra",
    [
        # an error return trace or a warning: the setup did go wrong
        "gpu-a7:31:44 [0] NCCL INFO init.cc:815 -> 1\n",
        "gpu-a7:31:44 [0] NCCL WARN NET/IB : Got async event : port error\n",
    ],
)
def test_a_connection_beside_nccl_trouble_keeps_the_setup_verdict(
    tmp_path: Path, extra: str
) -> None:
    text = _nccl_start("gpu-a7", "Channel 00/0 : 3[0] -> 0[0] [receive] via NET/IB/0") + extra
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure, verdict


def test_a_start_cut_before_any_network_connection_stays_a_setup_stall(tmp_path: Path) -> None:
    """Only connections inside the node (P2P) say nothing of the network between nodes."""
    text = _nccl_start("gpu-a7", "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read")
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure and verdict.kind is Kind.HANG, verdict


def _dcgm_health(*incidents: str) -> str:
    """`dcgmi health -c` as DCGM 3 prints it: overall, GPU and subsystem rows, incidents."""
    rows = "".join(f"|                           | {line} |\n" for line in incidents)
    return (
        "+---------------------------+-------------------------------------+\n"
        "| Health Monitor Report                                           |\n"
        "| Overall Health            | Failure                             |\n"
        "| -> 1                      | Failure                             |\n"
        "|    -> NVLINK system       | Failure                             |\n" + rows
    )


@pytest.mark.parametrize(
    "text",
    [
        _dcgm_health(*(f"GPU 1's NvLink link {n} is currently down" for n in range(4))),
        _dcgm_health("Only 0 NvLinks are up out of the expected 18"),
    ],
)
def test_every_link_of_a_gpu_down_is_links_that_never_came_up(tmp_path: Path, text: str) -> None:
    """A PCIe card without a bridge (or a fabric not set up) reports every link down: the
    node's inventory, not a fault the job met."""
    assert_healthy(tmp_path, "untrained", text)


@pytest.mark.parametrize(
    "incidents",
    [
        ("GPU 1's NvLink link 11 is currently down",),  # one link lost
        ("GPU 1's NvLink link 3 is currently down", "GPU 1's NvLink link 4 is currently down"),
        (
            "GPU 1's NvLink link 0 is currently down",
            "GPU 1's NvLink link 1 is currently down",
            "Detected 2 volatile double-bit ECC error(s) in GPU 1.",
        ),
        ("Only 4 NvLinks are up out of the expected 18",),
    ],
)
def test_links_lost_in_service_stay_the_gpu(tmp_path: Path, incidents: tuple[str, ...]) -> None:
    verdict = verdict_of(tmp_path, _dcgm_health(*incidents))
    assert verdict.category is Category.GPU_HARDWARE, verdict


def _claims(world: int, ranks: list[int], wording: str = "initializing ddp") -> str:
    return "".join(f"{wording}: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{world}\n" for r in ranks)


@pytest.mark.parametrize(
    "text",
    [
        # two nodes of four GPUs that both computed ranks 0-3 of a world of 8
        _claims(8, [0, 0, 1, 1, 2, 2, 3, 3]),
        # newer Lightning wording, two nodes of two GPUs, interleaved
        "GPU available: True (cuda), used: True\n"
        + _claims(4, [1, 0, 0, 1], "Initializing distributed"),
    ],
)
def test_one_rank_claimed_twice_is_the_launch(tmp_path: Path, text: str) -> None:
    """Every node computed the same ranks: the allocation differs from what the trainer was
    told; the group waits for ranks nobody holds."""
    verdict = verdict_of(tmp_path, text)
    assert verdict.category is Category.SCHEDULER and verdict.kind is Kind.HANG, verdict
    assert verdict.confidence < 0.5


@pytest.mark.parametrize(
    "text",
    [
        # one launch, every rank once
        _claims(4, [0, 2, 1, 3]),
        # a restart: every rank claimed, then claimed again
        _claims(4, [0, 1, 2, 3]) + "Restarting...\n" + _claims(4, [0, 1, 2, 3]),
    ],
)
def test_every_rank_claimed_is_no_duplicate(tmp_path: Path, text: str) -> None:
    assert "claimed twice" not in verdict_of(tmp_path, text).basis


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: Index file /tmp/tmpab12cd_9/train/index.json took too long to download, "
        "bailing out: 60.000 < 60.001 sec.",
        "TimeoutError: Timed out waiting for file /var/tmp/tmpz0y9x8w7/shard.00001.mds",
    ],
)
def test_a_wait_in_a_private_tempdir_is_the_library(tmp_path: Path, line: str) -> None:
    verdict = verdict_of(tmp_path, line + "\n")
    assert verdict.category is Category.SYSTEM_SOFTWARE, verdict
    assert verdict.confidence < 0.5


def test_a_wait_in_a_named_cache_is_no_private_tempdir(tmp_path: Path) -> None:
    """A cache directory the job named is shared as intended: a slow download, not this."""
    verdict = verdict_of(
        tmp_path,
        "RuntimeError: Index file /local/cache/train/index.json took too long to download, "
        "bailing out: 60.000 < 60.003 sec.\n",
    )
    assert "private_tempdir" not in verdict.basis, verdict
