"""Attempt boundaries without trainmedic's banner: the workload's own restart lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.logparse.attempts import is_restart_line
from trainmedic.core.logparse.scan import LineScanner, scan_lines
from trainmedic.core.model import Category
from trainmedic.offline.analyze import analyze_path


@pytest.mark.parametrize(
    "line",
    [
        "ts=2026-03-07T10:11:12.123Z rank=0 event=resume ckpt=/c/model_iter000860.pt iter=860",
        "Resuming from checkpoint at step 860",
        "Restored all states from the checkpoint at /ckpt/epoch=0-step=860.ckpt",
        " loading checkpoint from /ckpt/megatron at iteration 860",
        "Continuing training from checkpoint, will skip to saved global_step",
        "[default] Worker group FAILED. 2/3 attempts left; will restart worker group",
        "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, ...",
        "2026-11-29T09:00:00.000Z [rank0] node=node1 trainer start attempt=2 node=node1",
        # a JSON-lines logger (the lab's jsonl workload): an Xid its stdout held in attempt 2
        # was evidence against attempt 5 for analyze, never live
        '{"timestamp": "2026-12-01T15:30:25.410Z", "level": "info", "event": '
        '"checkpoint_restored", "step": 1900, "path": "/ckpt/latest.pt"}',
        '{"event": "resume", "iter": 860}',
    ],
)
def test_restart_lines(line: str) -> None:
    assert is_restart_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "ts=2026-03-07T10:11:12.123Z rank=0 event=step iter=861 loss=0.23",
        "Loading checkpoint shards: 100%|██████████| 2/2 [00:01<00:00,  1.9it/s]",
        "event=ckpt iter=900 path=/run/ckpt/model_iter000900.pt",
        "RuntimeError: Error(s) in loading state_dict for Linear",
        '{"event": "checkpoint_saved", "step": 2000, "path": "/ckpt/latest.pt"}',
        '{"event": "train_step", "step": 2001, "loss": 0.5, "note": "restored lr"}',
    ],
)
def test_not_restart_lines(line: str) -> None:
    assert not is_restart_line(line)


def _lines(*texts: str) -> list[bytes]:
    return [t.encode() + b"\n" for t in texts]


ERROR = "[rank1]: RuntimeError: loss scaler state is inconsistent at iteration 120"


def test_an_earlier_attempts_error_is_not_evidence_in_an_appended_log() -> None:
    first = [f"rank=0 event=step iter={i} loss=0.5" for i in range(1, 30)]
    second = [f"rank={r} event=resume ckpt=/c/m.pt iter=20" for r in range(4)]
    second += [f"rank=0 event=step iter={i} loss=0.5" for i in range(21, 25)]
    scan = scan_lines(_lines(*first, ERROR, *second), "job.out")
    assert scan.events == ()
    assert (scan.progress.first_iteration, scan.progress.last_iteration) == (21, 24)
    assert scan.attempt_line == len(first) + 1


def test_one_start_up_is_one_boundary_even_when_a_rank_fails_inside_it() -> None:
    """Every rank announces its resume; rank 1 fails before rank 3 has announced: the
    failure belongs to the attempt the announcements start."""
    first = [f"rank=0 event=step iter={i} loss=0.5" for i in range(1, 30)]
    burst = [f"rank={r} event=resume ckpt=/c/m.pt iter=20" for r in range(3)]
    late = "rank=3 event=resume ckpt=/c/m.pt iter=20"
    scan = scan_lines(_lines(*first, *burst, ERROR, late), "job.out")
    assert [e.line for e in scan.events] == [len(first) + len(burst) + 1]


def test_a_start_up_that_failed_before_training_ends_at_the_next_one() -> None:
    """The same rank announcing again is a new start, trained or not."""
    crashed = ["rank=0 event=resume ckpt=/c/m.pt iter=20", ERROR]
    again = ["rank=0 event=resume ckpt=/c/m.pt iter=20", "rank=0 event=step iter=21 loss=1"]
    scan = scan_lines(_lines(*crashed, *again), "job.out")
    assert scan.events == () and scan.attempt_line == 2


def test_the_live_scanner_numbers_lines_as_the_file_does() -> None:
    scanner = LineScanner("job.err", kernel_lines=False)
    (event,) = [e for e in scanner.feed(ERROR, 4242)]
    assert event.line == 4242 and scanner.result().events == (event,)
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus."
    forged = scanner.feed(xid, 4243)
    assert forged and all(e.evidence.value == "app_log" for e in forged)


def test_a_kernel_event_of_the_previous_attempt_is_not_evidence_against_the_next(
    tmp_path: Path,
) -> None:
    """A directory: the job's log restarted (resume line stamped 10:05:00) and failed on its
    own; the node's kernel log still holds the Xid that ended the attempt before (10:00:00).
    One that came just before the new attempt's ranks announced themselves still counts."""
    (tmp_path / "job.out").write_text(
        "2026-03-07T10:00:00.000Z [rank0] iter=5 loss=0.5 step_s=0.1\n"
        "2026-03-07T10:05:00.000Z [rank0] Resuming from checkpoint at step 4\n"
        "2026-03-07T10:05:01.000Z [rank0] iter=5 loss=0.5 step_s=0.1\n"
        "2026-03-07T10:05:02.000Z [rank0] KeyError: 'decoder.layers.12.weight'\n"
    )
    (tmp_path / "node2").mkdir()
    kern = tmp_path / "node2" / "kern.log"
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus."
    kern.write_text(f"2026-03-07T10:00:00.500Z node2 kernel: {xid}\n")
    verdict = analyze_path(tmp_path).verdict
    assert verdict.category is Category.APPLICATION, verdict.basis
    kern.write_text(f"2026-03-07T10:04:55.000Z node2 kernel: {xid}\n")
    assert analyze_path(tmp_path).verdict.category is Category.GPU_HARDWARE
