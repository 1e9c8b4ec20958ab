"""Mechanisms found missing when attribution was tried on real logs from issue threads it had
never seen (none of those logs is here: every log below is written for these tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.logparse.elastic import ChildFailureTracker
from trainmedic.core.model import Category
from trainmedic.offline.analyze import analyze_path

CASES = {
    # Ranks disagreeing on a collective: NCCL reports the size mismatch and stops.
    "nccl_message_truncated": (
        "iter 300 loss 2.11\n"
        "gpu-b3:9012:9120 [1] transport/net_socket.cc:431 NCCL WARN NET/Socket : peer "
        "10.2.0.9<50112> message truncated : receiving 524288 bytes instead of 65536\n"
        "gpu-b3:9012:9120 [1] NCCL INFO transport/net.cc:1130 -> 5\n",
        Category.APPLICATION,
    ),
    "nccl_message_truncated_wrapped": (
        "gpu-b3:9012:9120 [1] transport/net_socket.cc:431 NCCL WARN NET/Socket : peer "
        "10.2.0.9<50112> message truncated :\nreceiving 524288 bytes instead of 65536\n",
        Category.APPLICATION,
    ),
    "nccl_collective_mismatch": (
        "n7:401:488 [3] transport/net_ib.cc:1101 NCCL WARN NET/IB : req 0/1 tag 4 peer "
        "10.4.0.2<39001> collective mismatch error, local size 262144 remote size 131072\n",
        Category.APPLICATION,
    ),
    # srun names the tasks the step's cgroup OOM killer ended.
    "srun_task_out_of_memory": (
        "epoch 2 step 1200 loss 0.71\nsrun: error: cn-044: task 0: Out Of Memory\n",
        Category.APPLICATION,
    ),
    # A torchrun failure table pasted flattened: only the traceback field keeps its shape.
    "flattened_child_failed_table": (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "train.py FAILED\nFailures:\n<NO_OTHER_FAILURES>\n"
        "Root Cause (first observed failure):\n[0]:\ntime\nhost\n"
        "2024-03-01_10:00:00\nbox-1\nrank1 (local_rank: 1)exitcode: -9 (pid: 5120)\n"
        "traceback : Signal 9 (SIGKILL) received by PID 5120\n",
        Category.APPLICATION,
    ),
    # Exclusive-process compute mode with the GPU already held: the node's configuration...
    "devices_busy": (
        "rank 2 binding to cuda:0\n"
        "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n",
        Category.SYSTEM_SOFTWARE,
    ),
    # ...unless the kernel says the GPU itself is gone.
    "devices_busy_after_gpu_lost": (
        "kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=991, GPU has fallen off the bus.\n"
        "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n",
        Category.GPU_HARDWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mechanism(tmp_path: Path, name: str) -> None:
    text, category = CASES[name]
    path = tmp_path / f"{name}.log"
    path.write_text(text)
    verdict = analyze_path(path).verdict
    assert verdict.failure
    assert verdict.category is category, verdict.basis


def test_lone_traceback_field_is_a_child_failure() -> None:
    tracker = ChildFailureTracker()
    found = tracker.feed(7, "traceback : Signal 6 (SIGABRT) received by PID 881")
    assert found is not None
    assert (found.exitcode, found.line, found.rank) == (-6, 7, None)
    assert found.detail.startswith("Signal 6 (SIGABRT)")


def test_log_message_truncation_is_no_failure(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text("step 10 loss 1.0\nWARNING: log message truncated to 4096 characters\n")
    assert not analyze_path(path).verdict.failure


NCCL_SETUP = (
    "w0:311:311 [0] NCCL INFO Bootstrap : Using eth0:10.9.0.3<0>\n"
    "w0:311:311 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal net.\n"
    "w0:311:402 [0] NCCL INFO NET/Socket : Using [0]eth0:10.9.0.3<0>\n"
    "w0:311:402 [0] NCCL INFO Channel 00/02 :    0   1\n"
)


def test_log_ending_inside_nccl_setup_is_a_platform_hang(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text("Loading model...\n" + NCCL_SETUP)
    verdict = analyze_path(path).verdict
    assert verdict.failure
    assert (verdict.category, verdict.kind.value) == (Category.SYSTEM_SOFTWARE, "hang")
    assert verdict.confidence <= 0.3


def test_nccl_setup_followed_by_training_is_no_failure(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    steps = "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(1, 30))
    path.write_text(NCCL_SETUP + steps)
    assert not analyze_path(path).verdict.failure


IB_TIMEOUT = (
    "w0:311:520 [0] transport/net_ib.cc:1699 NCCL WARN NET/IB : Got completion from peer "
    "10.9.0.4<40122> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
)


def test_rdma_timeout_right_after_nccl_setup_is_configuration(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(NCCL_SETUP + "w0:311:402 [0] NCCL INFO Connected all rings\n" + IB_TIMEOUT)
    verdict = analyze_path(path).verdict
    assert verdict.category is Category.SYSTEM_SOFTWARE, verdict.basis
    assert verdict.confidence <= 0.5


def test_rdma_timeout_after_training_steps_stays_the_network(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    steps = "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(1, 30))
    path.write_text(NCCL_SETUP + steps + IB_TIMEOUT)
    assert analyze_path(path).verdict.category is Category.NETWORK_HARDWARE
