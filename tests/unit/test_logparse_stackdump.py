"""Thread stack dumps (faulthandler, py-spy), recurring hardware context, the rendezvous that
never completed, and success summaries: the parsers and the pure mechanisms."""

from __future__ import annotations

import pytest

from trainmedic.core.attribute.recurring import RECURRING_MIN, recurring_context
from trainmedic.core.attribute.stuck import rendezvous_never_completed, stuck_in_stack_dump
from trainmedic.core.logparse.evidence import is_failure_text
from trainmedic.core.logparse.scan import scan_lines
from trainmedic.core.logparse.stackdump import StackDumpTracker
from trainmedic.core.model import Category, Event, EvidenceSource, Kind, Role


def _dumps(text: str) -> StackDumpTracker:
    tracker = StackDumpTracker()
    for n, line in enumerate(text.splitlines(), 1):
        if tracker.wants(line) or tracker.active:
            tracker.feed(n, line)
    return tracker


FAULTHANDLER = (
    "Thread 0x00007f1 (most recent call first):\n"
    '  File "/usr/lib/python3.10/threading.py", line 320 in wait\n'
    '  File "/usr/lib/python3.10/threading.py", line 600 in run\n\n'
    "Current thread 0x00007f2 (most recent call first):\n"
    '  File "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py", line 800 in '
    "synchronize\n"
    '  File "/work/train.py", line 88 in step\n'
    '  File "/work/train.py", line 120 in <module>\n'
    "loss 1.2\n"
)


def test_faulthandler_dump_threads_and_main() -> None:
    (dump,) = _dumps(FAULTHANDLER).dumps()
    assert len(dump.threads) == 2 and not dump.after_fatal
    main = dump.main_thread()
    assert main is not None
    assert main.frames[0] == "synchronize (torch/cuda/__init__.py)"
    assert main.frames[-1].startswith("<module>")


def test_py_spy_dump_main_thread_by_name() -> None:
    text = (
        'Thread 71 (idle): "pin_memory"\n    get (queue.py:180)\n\n'
        'Thread 70 (active+gil): "MainThread"\n    barrier (torch/distributed/c10d.py:3400)\n'
        "    main ()\n"
    )
    (dump,) = _dumps(text).dumps()
    main = dump.main_thread()
    assert main is not None and main.name == "MainThread"
    assert main.frames == ("barrier (torch/distributed/c10d.py)", "main ()")


def test_cpp_exception_frames_are_no_thread_dump() -> None:
    text = (
        "Exception raised from checkTimeout at ProcessGroupNCCL.cpp:686 (most recent call first):\n"
        "frame #0: c10::Error::Error() + 0x80\n"
    )
    assert _dumps(text).dumps() == ()


def test_dump_after_fatal_python_error_is_a_crash_report() -> None:
    (dump,) = _dumps("Fatal Python error: Aborted\n\n" + FAULTHANDLER).dumps()
    assert dump.after_fatal
    assert stuck_in_stack_dump((dump,)) is None


def test_stack_dump_finding_names_where_it_waited() -> None:
    finding = stuck_in_stack_dump(_dumps(FAULTHANDLER).dumps())
    assert finding is not None
    assert (finding.category, finding.kind) == (Category.APPLICATION, Kind.HANG)
    assert finding.confidence < 0.5 and "synchronize" in finding.basis


def test_scan_keeps_stack_dumps() -> None:
    scan = scan_lines((line.encode() for line in FAULTHANDLER.splitlines(True)), "dump.log")
    assert len(scan.stack_dumps) == 1


def _ctx(signature: str, node: str | None = "n1", strong: bool = False) -> Event:
    return Event(
        signature=signature,
        category=Category.NODE_HARDWARE,
        kind=Kind.NONE,
        role=Role.CONTEXT,
        line=1,
        text="Corrected error(s): memory read error",
        node=node,
        evidence=EvidenceSource.APP_LOG,
        strong=strong,
    )


def test_recurring_needs_the_same_record_on_one_node() -> None:
    few = [_ctx("edac.corrected") for _ in range(RECURRING_MIN - 1)]
    assert recurring_context(few) == {}
    spread = [_ctx("edac.corrected", node=f"n{i}") for i in range(RECURRING_MIN)]
    assert recurring_context(spread) == {}
    many = [_ctx("edac.corrected") for _ in range(RECURRING_MIN)]
    notes = recurring_context(many)
    assert set(notes) == {id(e) for e in many}
    assert "recurring" in next(iter(notes.values()))


def test_rendezvous_never_completed_reads_start_and_done_markers() -> None:
    text = "Initializing TorchBackend in DeepSpeed with backend nccl\n"
    scan = scan_lines([text.encode()], "job.log")
    finding = rendezvous_never_completed((scan.timeline,), scan.progress)
    assert finding is not None and finding.category is Category.APPLICATION
    done = text + "Distributed environment: MULTI_GPU  Backend: nccl\n"
    scan = scan_lines((line.encode() for line in done.splitlines(True)), "job.log")
    assert rendezvous_never_completed((scan.timeline,), scan.progress) is None
    nccl = text + "n1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    scan = scan_lines((line.encode() for line in nccl.splitlines(True)), "job.log")
    assert rendezvous_never_completed((scan.timeline,), scan.progress) is None


@pytest.mark.parametrize(
    "line",
    [
        '"failed": 0,',
        '"raw_error": null,',
        "error_code=0",
        "No failed Attributes found.",
        "0 tests failed, 12 passed",
        "worker exited with exit code 0",
        '{"state": "SUCCEEDED", "name": "torchelastic.worker.status.SUCCEEDED"}',
    ],
)
def test_success_summaries_are_not_failure_evidence(line: str) -> None:
    assert not is_failure_text(line)


@pytest.mark.parametrize(
    "line",
    ["KeyError: 0", "failed: 3", "worker exited with exit code 1", '"failed": 2,'],
)
def test_nonzero_failures_stay_evidence(line: str) -> None:
    assert is_failure_text(line)
