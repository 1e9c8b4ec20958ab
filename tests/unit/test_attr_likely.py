"""Messages whose category is only the usual one (``likely`` in the catalogue), and collective
timeouts with nothing else: each is named as a guess, below the stop threshold, and yields to
a line that says more.

Before, these verdicts were "unknown" (or, for ROCm's page fault, application at 0.8): the
real threads about them (NCCL's "unhandled cuda error" 7 of 8 system_software, ROCm's memory
access fault 4 of 4, cuBLAS/cuDNN execution failures, collective timeouts alone 3 of 3
application among high+medium labels) mostly concluded one category."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.attribute.collective import COLLECTIVE_TIMEOUTS, TIMEOUTS_ALONE_CONFIDENCE
from trainmedic.core.attribute.verdict_build import LIKELY_CONFIDENCE
from trainmedic.core.model import Action, Category, Role
from trainmedic.core.signatures.catalogue import load_catalogue
from trainmedic.offline.analyze import AnalysisResult, analyze_path

_STEPS = "".join(f"step {i} loss 2.{i}\n" for i in range(1, 4))

LIKELY_LINES = [
    (
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
        Category.SYSTEM_SOFTWARE,
    ),
    (
        "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED",
        Category.SYSTEM_SOFTWARE,
    ),
    (
        "Memory access fault by GPU node-2 (Agent handle: 0x55d0c1c2e0) on address "
        "0x7f1c2a000000. Reason: Page not present or supervisor privilege.",
        Category.SYSTEM_SOFTWARE,
    ),
    # a bare SIGSEGV: labelled real segfaults were a library / extension version 4 of 5 times
    ("/var/spool/slurmd/job77/slurm_script: line 9: 4411 Segmentation fault (core dumped) "
     "python train.py", Category.SYSTEM_SOFTWARE),
    ("double free or corruption (!prev)", Category.APPLICATION),
]  # fmt: skip


def _analyze(tmp_path: Path, text: str) -> AnalysisResult:
    path = tmp_path / "job.log"
    path.write_text(text)
    return analyze_path(path)


@pytest.mark.parametrize(("line", "category"), LIKELY_LINES)
def test_a_likely_category_is_named_as_a_guess_and_restarted(
    tmp_path: Path, line: str, category: Category
) -> None:
    result = _analyze(tmp_path, _STEPS + line + "\n")
    assert result.verdict.failure and result.verdict.category is category, result.verdict.basis
    assert result.verdict.confidence == LIKELY_CONFIDENCE < 0.5
    assert result.advice.action is not Action.STOP
    assert not result.advice.drain_nodes


def test_a_likely_wrapper_yields_to_the_detail_line_below_it(tmp_path: Path) -> None:
    text = (
        "[rank5]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "[rank5]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank5]: Last error:\n"
        "[rank5]: Cuda failure 'out of memory'\n"
    )
    result = _analyze(tmp_path, text)
    assert result.verdict.category is Category.APPLICATION, result.verdict.basis


def test_an_earlier_proven_cause_outranks_a_likely_line(tmp_path: Path) -> None:
    text = (
        _STEPS + "OSError: [Errno 28] No space left on device: '/ckpt/step_3.pt'\n"
        "Segmentation fault (core dumped)\n"
    )
    result = _analyze(tmp_path, text)
    assert result.verdict.category is Category.STORAGE, result.verdict.basis


def test_the_likely_marks_are_on_primary_entries_with_a_category() -> None:
    likely = [s for s in load_catalogue().signatures if s.likely]
    assert {s.id for s in likely} >= {"nccl.unhandled_cuda_error", "rocm.memory_access_fault"}
    for s in likely:
        assert s.role is Role.PRIMARY and s.category is not Category.UNKNOWN, s.id
        assert not s.strong, s.id  # a guess never drains


WATCHDOG = (
    "[rank{r}]:[E1104 11:02:17.112 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=4051, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
)


def test_collective_timeouts_alone_are_the_ranks_own_code_as_a_guess(tmp_path: Path) -> None:
    text = _STEPS * 20 + "".join(WATCHDOG.format(r=r) for r in (0, 1, 3))
    result = _analyze(tmp_path, text)
    assert result.verdict.category is Category.APPLICATION, result.verdict.basis
    assert result.verdict.confidence == TIMEOUTS_ALONE_CONFIDENCE
    assert "timeouts and nothing else" in result.verdict.basis
    assert result.advice.action is not Action.STOP and not result.advice.drain_nodes


@pytest.mark.parametrize(
    "other",
    [
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.7<40412> with error 12, opcode 0, "
        "len 0, vendor err 129 (Recv)",
        "torch.distributed.DistNetworkError: The client socket has failed to connect to "
        "[master-0]:29500 (errno: 110 - Connection timed out).",
        "ConnectionResetError: [Errno 104] Connection reset by peer",
    ],
)
def test_timeouts_with_another_failure_are_not_this_guess(tmp_path: Path, other: str) -> None:
    text = _STEPS * 20 + WATCHDOG.format(r=0) + other + "\n"
    result = _analyze(tmp_path, text)
    assert "timeouts and nothing else" not in result.verdict.basis


def test_the_collective_timeout_ids_are_catalogue_cascades() -> None:
    by_id = {s.id: s for s in load_catalogue().signatures}
    for signature in COLLECTIVE_TIMEOUTS:
        assert signature in by_id, signature
        assert by_id[signature].role is Role.CASCADE, signature
