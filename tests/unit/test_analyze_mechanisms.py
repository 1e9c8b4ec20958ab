"""Failure mechanisms end to end through ``analyze_path`` (catalogue + attribution), on short
logs written for these tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.offline.analyze import analyze_path

CASES = {
    "ecc": (
        "Epoch 3:  41%|████      | 410/1000 [05:12<07:30,  1.31it/s, loss=1.23, v_num=2]\n"
        "RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
        "gpu_hardware",
    ),
    "nccl_last_error_detail": (
        "[rank5]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "[rank5]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank5]: Last error:\n"
        "[rank5]: Cuda failure 'an illegal memory access was encountered'\n",
        "application",
    ),
    "time_limit": (
        "slurmstepd: error: *** JOB 4411873 ON gpu-a-017 CANCELLED AT 2024-08-02T11:00:14 "
        "DUE TO TIME LIMIT ***\nsrun: error: gpu-a-017: tasks 0-7: Terminated\n",
        "scheduler",
    ),
    "checkpoint_disk_full": (
        "step 4000 loss 1.02\nTraceback (most recent call last):\n"
        '  File "/app/train.py", line 99, in <module>\n'
        '    torch.save(model.state_dict(), f"/scratch/ckpt/step_{step}.pt")\n'
        "OSError: [Errno 28] No space left on device\n",
        "storage",
    ),
    "dataloader_shm": (
        "RuntimeError: DataLoader worker (pid 2911) is killed by signal: Bus error. It is "
        "possible that dataloader's workers are out of shared memory.\n",
        "system_software",
    ),
    "peer_closed_after_app_error": (
        "[rank1]: RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer "
        "[10.1.0.4]:29500\n"
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/app/train.py", line 40, in <module>\n'
        "[rank0]: ValueError: expected 3 channels, got 4\n",
        "application",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mechanism(tmp_path: Path, name: str) -> None:
    text, category = CASES[name]
    path = tmp_path / f"{name}.log"
    path.write_text(text)
    verdict = analyze_path(path).verdict
    assert verdict.failure
    assert verdict.category == category, verdict.basis


def test_app_error_names_its_rank_not_the_peer(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(CASES["peer_closed_after_app_error"][0])
    assert analyze_path(path).verdict.implicated.ranks == (0,)


def test_terminal_wrapped_timeout_is_rejoined(tmp_path: Path) -> None:
    width = 120
    long = (
        "[rank1]:[E307 05:30:20.039566920 ProcessGroupNCCL.cpp:2057] [Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST, NumelIn=9, "
        "NumelOut=9, Timeout(ms)=1800000) ran for 1800085 milliseconds before timing out."
    )
    pad = "[2026-03-07 04:58:42,954] [INFO] [trainer] Loading shards".ljust(width)
    lines = [pad, pad, *(long[i : i + width] for i in range(0, len(long), width))]
    path = tmp_path / "wrapped.log"
    path.write_text("\n".join(lines) + "\n")
    verdict = analyze_path(path).verdict
    # SeqNum=7 sits on the continuation line: only the re-joined line knows it is setup.
    assert verdict.category == "application", verdict.basis


def test_a_warning_the_job_trained_past_is_no_failure(tmp_path: Path) -> None:
    lines = [
        "gpu0:311:311 [0] NCCL WARN Cuda failure 'peer access is not supported between "
        "these two devices'"
    ]
    lines += [f"node=n1 iter={i} loss=0.5 step_s=0.1" for i in range(40)]
    path = tmp_path / "ok.log"
    path.write_text("\n".join(lines) + "\n")
    assert not analyze_path(path).verdict.failure
