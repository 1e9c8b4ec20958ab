"""The general evidence layer: failure lines no signature knows still name a category (never
above 0.45, and the basis says so); healthy lines never make a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.attribute.evidence import (
    EVIDENCE_CONFIDENCE,
    Cue,
    default_cues,
    read_evidence,
)
from trainmedic.core.logparse.evidence import EvidenceCollector, EvidenceLine, is_failure_text
from trainmedic.core.model import Category, Kind
from trainmedic.offline.analyze import analyze_path


@pytest.mark.parametrize("cue", default_cues(), ids=lambda c: c.id)
def test_every_cue_matches_its_examples_and_not_its_counter_examples(cue: Cue) -> None:
    assert cue.examples
    for example in cue.examples:
        assert cue.regex.search(example), example
    for counter in cue.counter_examples:
        assert not cue.regex.search(counter), counter


@pytest.mark.parametrize(
    "line",
    [
        "FATAL: the storage backend refused the write",
        "worker 3 died unexpectedly",
        "Job 4412 CANCELLED",
        "node-17 is not responding, giving up",
        "panic: runtime error: invalid memory address",
        "no space left on device while writing shard 3",
        "No CUDA GPUs are available: job failed",
        # an option named in the advice of a failure line does not make the line healthy
        "ERROR store.py:42 -- Could not upload the checkpoint; consider raising upload_timeout",
        "ssh: connect to host gpu-7 port 22: No route to host",
        "Config space reset not completed for device 0!",
        "The accelerator did not come back after the reset",
    ],
)
def test_failure_words_are_evidence(line: str) -> None:
    assert is_failure_text(line)


@pytest.mark.parametrize(
    "line",
    [
        "number of nan iterations:   0 | number of skipped iterations:   0 |",
        "W0902 03:33:36.516 generator_dataset_op.cc:103] Error occurred when finalizing iterator",
        "2020-06-08 05:30:15.889706: W tensorflow/core/kernels/data/op.cc:103] Error occurred",
        "/opt/lib/python3.10/site-packages/x.py:12: UserWarning: failed to load image backend",
        "[INFO] retrying after a transient error",
        "  error_file: <N/A>",
        "  restart_policy: on_error_retry",
        "[INFO] Could not find the optional network plugin; using the internal one",
        "Launching with --nccl-timeout 1800 and timeout=600",
        "0 errors, 0 failures",
        "checking inputs: no ValueError raised",
        "all 12 shards loaded without any errors",
        "resume test passed (no RuntimeError, no KeyError)",
        "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f>",
        '  File "/opt/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 3',
        "#       size  count  type  redop  time  algbw  busbw  error",
        "step 120 loss 1.23 lr 3e-4",
    ],
)
def test_healthy_or_quiet_lines_are_not_evidence(line: str) -> None:
    assert not is_failure_text(line)


def lines(*texts: str, progress_after: int = 0) -> tuple[EvidenceLine, ...]:
    return tuple(EvidenceLine("job.log", i + 1, t, progress_after) for i, t in enumerate(texts))


def test_evidence_names_a_category_with_a_capped_confidence() -> None:
    found = read_evidence(lines("write to /lustre/ckpt failed: Input/output error"))
    assert found is not None
    assert found.category is Category.STORAGE
    assert found.confidence <= EVIDENCE_CONFIDENCE
    assert found.basis.startswith("evidence:")
    assert found.event.signature == "evidence.storage"


def test_failure_lines_without_a_cue_are_an_unknown_failure() -> None:
    found = read_evidence(lines("something went badly: aborting now"))
    assert found is not None and found.category is Category.UNKNOWN
    assert 0 < found.confidence < 0.3


def test_hang_words_make_a_hang_and_survived_lines_do_not_count() -> None:
    found = read_evidence(lines("collective timed out waiting for rank 3 (deadlock?)"))
    assert found is not None and found.kind is Kind.HANG
    assert read_evidence(lines("disk error on /scratch", progress_after=500)) is None
    assert read_evidence(()) is None


def test_earlier_lines_weigh_more() -> None:
    found = read_evidence(
        lines(
            "kernel panic on the node: machine check error",
            *["ValueError: expected tensor"] * 2,
        )
    )
    assert found is not None and found.category is Category.NODE_HARDWARE


def test_collector_keeps_head_and_tail_and_counts_all() -> None:
    collector = EvidenceCollector("x.log")
    for n in range(1, 1001):
        collector.feed(n, f"error {n}: worker failed", reports=n)
    kept = collector.lines(reports=1000)
    assert collector.count == 1000 and len(kept) == 120
    assert kept[0].line == 1 and kept[-1].line == 1000
    assert kept[0].progress_after == 999 and kept[-1].progress_after == 0


def test_analyze_unknown_failure_text_is_a_failure_not_none(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(
        "step 1 loss 2.0\nstep 2 loss 1.9\n"
        "FATAL: GPU 0 is lost, node gpu-a07 must be reset\nexiting\n"
    )
    verdict = analyze_path(path).verdict
    assert verdict.failure and verdict.category is Category.GPU_HARDWARE
    assert verdict.confidence <= EVIDENCE_CONFIDENCE and "evidence:" in verdict.basis
    assert verdict.implicated.nodes == ()  # a guess names no node to exclude


def test_analyze_healthy_log_with_warnings_is_no_failure(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(
        "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(50))
        + "/x.py:3: UserWarning: failed to import optional dependency\n"
        + "W0101 00:00:00.000 op.cc:10] Error occurred when finalizing iterator: Cancelled\n"
    )
    assert not analyze_path(path).verdict.failure
