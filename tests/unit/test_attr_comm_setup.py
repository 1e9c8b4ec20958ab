"""Failures of the communication stack's setup read by mechanism (first met in real batch04;
written here in other launchers' and NCCL versions' shapes): a process that died silently
while NCCL was setting up, a communicator whose bootstrap a peer's socket broke, and a start-up
excerpt that merely ends after the process group formed."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.model import Category
from trainmedic.offline.analyze import analyze_path

NCCL_SETUP = (
    "gpu-b03:5512:5601 [1] NCCL INFO Using network Socket\n"
    "gpu-b03:5512:5601 [1] NCCL INFO Channel 00/02 :    0   1\n"
    "gpu-b03:5512:5601 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via P2P/IPC\n"
    "gpu-b03:5512:5601 [1] NCCL INFO Channel 01 : 1[1] -> 0[0] via SHM/direct/direct\n"
)


def _verdict(tmp_path: Path, text: str) -> tuple[Category | None, float, str]:
    path = tmp_path / "job.log"
    path.write_text(text)
    v = analyze_path(path).verdict
    return (v.category if v.failure else None), v.confidence, v.basis


@pytest.mark.parametrize(
    "ending",
    [
        "srun: error: gpu-b03: task 1: Exited with exit code 1\n",
        "Process 1 terminated with exit code 1\n",
        "===================================================================================\n"
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   RANK 1 PID 5512 RUNNING AT gpu-b03\n"
        "=   EXIT STATUS: 135\n",
    ],
)
def test_silent_death_during_nccl_setup_is_the_software_stack(tmp_path: Path, ending: str) -> None:
    category, confidence, basis = _verdict(tmp_path, NCCL_SETUP + ending)
    assert category is Category.SYSTEM_SOFTWARE and confidence < 0.5, basis
    assert "NCCL was still setting up" in basis


def test_death_after_steps_is_not_a_setup_failure(tmp_path: Path) -> None:
    steps = "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(30))
    text = NCCL_SETUP + steps + "Process 1 terminated with exit code 1\n"
    assert "NCCL was still setting up" not in _verdict(tmp_path, text)[2]


def test_nccl_setup_then_training_is_no_failure(tmp_path: Path) -> None:
    steps = "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(30))
    assert _verdict(tmp_path, NCCL_SETUP + steps + "Training done.\n")[0] is None


BOOTSTRAP_RESET = (
    "node7:881:881 [0] misc/socket.cc:50 NCCL WARN Net : Call to recv from 10.1.2.3<40022> "
    "failed : Connection reset by peer\n"
    "node7:881:881 [0] NCCL INFO misc/socket.cc:61 -> 6\n"
    "node7:881:881 [0] NCCL INFO bootstrap.cc:152 -> 6\n"
    "node7:881:881 [0] NCCL INFO init.cc:1089 -> 6\n"
    "node7:881:881 [0] NCCL INFO init.cc:1301 -> 6\n"
)


def test_peer_reset_inside_nccl_bootstrap_is_a_communicator_that_never_formed(
    tmp_path: Path,
) -> None:
    category, confidence, basis = _verdict(tmp_path, BOOTSTRAP_RESET)
    assert category is Category.SYSTEM_SOFTWARE and confidence < 0.5, basis
    assert "bootstrap" in basis


def test_peer_reset_mid_run_is_not_a_bootstrap_failure(tmp_path: Path) -> None:
    steps = "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(30))
    text = steps + BOOTSTRAP_RESET.replace("bootstrap.cc", "transport/net.cc").replace(
        "init.cc", "proxy.cc"
    )
    assert "bootstrap" not in _verdict(tmp_path, text)[2]


def test_refused_connect_in_bootstrap_stays_a_dead_peer(tmp_path: Path) -> None:
    text = BOOTSTRAP_RESET.replace(
        "Net : Call to recv from 10.1.2.3<40022> failed : Connection reset by peer",
        "socketStartConnect: Connect to 10.1.2.3<40022> failed : Connection refused",
    )
    assert "bootstrap" not in _verdict(tmp_path, text)[2]


def test_startup_excerpt_that_goes_on_after_init_is_no_hang(tmp_path: Path) -> None:
    text = (
        "[W init.cpp:767] Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4\n"
        "All distributed processes registered. Starting with 4 processes\n"
        "========================================\n"
        "\n"
        "  | Name  | Type      | Params\n"
        "0 | model | ResNet    | 11.2 M\n"
    )
    assert _verdict(tmp_path, text)[0] is None


def test_log_ending_right_after_init_is_still_a_first_collective_hang(tmp_path: Path) -> None:
    text = (
        "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n"
        "All distributed processes registered. Starting with 2 processes\n"
        "----------------------------------------\n"
        "distributed_backend=nccl\n"
    )
    assert _verdict(tmp_path, text)[0] is Category.SYSTEM_SOFTWARE


def test_process_group_warning_at_a_normal_exit_is_no_failure(tmp_path: Path) -> None:
    steps = "".join(f"iter {i}: loss {2.0 - i / 100:.3f}\n" for i in range(30))
    text = steps + (
        "[rank1]:[W1201 08:00:00.0 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group "
        "has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, "
        "the application should call destroy_process_group.\n"
    )
    assert _verdict(tmp_path, text)[0] is None


def test_the_same_warning_after_a_shutdown_request_is_still_a_failure(tmp_path: Path) -> None:
    steps = "".join(f"iter {i}: loss {2.0 - i / 100:.3f}\n" for i in range(30))
    text = steps + (
        "W1201 08:00:00.0 1 torch/distributed/elastic/agent/server/api.py:723] Received 15 "
        "death signal, shutting down workers\n"
        "W1201 08:00:00.1 1 torch/distributed/elastic/multiprocessing/api.py:900] Sending "
        "process 4412 closing signal SIGTERM\n"
        "[rank1]:[W1201 08:00:00.0 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group "
        "has NOT been destroyed before we destruct ProcessGroupNCCL.\n"
    )
    assert _verdict(tmp_path, text)[0] is not None
