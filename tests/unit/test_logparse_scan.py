"""The streaming scan: evidence source, ranks, limits, windows, wrapped lines."""

from __future__ import annotations

from trainmedic.core.logparse.scan import ScanLimits, scan_lines
from trainmedic.core.model import EvidenceSource

XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."


def lines(*texts: str) -> list[bytes]:
    return [t.encode() + b"\n" for t in texts]


def test_kernel_evidence_by_file_name_and_by_prefix() -> None:
    by_name = scan_lines(lines(XID), "job/kern.log")
    by_prefix = scan_lines(lines(f"Nov 28 14:01:59 n7 kernel: {XID}"), "job/stdout.txt")
    in_app = scan_lines(lines(f"print from my app: xid {XID[6:]}"), "job/stdout.txt")
    assert by_name.events[0].evidence is EvidenceSource.KERNEL_LOG
    assert by_prefix.events[0].evidence is EvidenceSource.KERNEL_LOG
    assert by_prefix.events[0].node == "n7"
    assert all(e.evidence is EvidenceSource.APP_LOG for e in in_app.events)


def test_rank_from_file_name_and_prefix() -> None:
    scan = scan_lines(
        lines("RuntimeError: CUDA error: uncorrectable ECC error encountered"), "rank3.log"
    )
    assert scan.events[0].rank == 3 and 3 in scan.ranks_seen
    scan = scan_lines(
        lines("[rank6]: RuntimeError: CUDA error: uncorrectable ECC error"), "out.log"
    )
    assert scan.events[0].rank == 6


def test_node_hint_for_files_in_a_node_directory() -> None:
    scan = scan_lines(lines(XID), "job/gpu-node-3/dmesg.txt", node_hint="gpu-node-3")
    assert scan.events[0].node == "gpu-node-3"


def test_event_cap_and_window() -> None:
    text = ["step 1 loss 1.0"] * 3 + ["OSError: [Errno 116] Stale file handle"] * 50
    scan = scan_lines(lines(*text), "a.log", limits=ScanLimits(max_events=10, max_windows=2))
    assert len(scan.events) == 10
    assert len(scan.windows) == 2
    first = scan.events[0]
    assert [n for n, _ in scan.windows[first]][:4] == [1, 2, 3, 4]


def test_progress_summary_and_checkpoint() -> None:
    text = [f"node=n iter={i} loss=0.5 step_s=0.2" for i in range(1, 30)]
    text.insert(10, "checkpoint saved iter=10 path=/c/10.pt")
    s = scan_lines(lines(*text), "a.log").progress
    assert (s.first_iteration, s.last_iteration, s.last_checkpoint) == (1, 29, 10)
    assert s.last_step_time == 0.2


def test_progress_after_each_event() -> None:
    text = ["OSError: [Errno 116] Stale file handle"] + [f"iter {i}" for i in range(25)]
    scan = scan_lines(lines(*text), "a.log")
    assert scan.progress_after[scan.events[0]] >= 20


def test_wrapped_line_is_joined_before_matching() -> None:
    width = 100
    pad = "I" * width
    full = (
        "[rank2]:[E1128 14:11:59.5 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE) ran for 600047 ms"
    )
    cut = [full[i : i + width] for i in range(0, len(full), width)]
    assert len(cut) == 2 and cut[0][-1].isalnum() and cut[1][0].isalnum()
    scan = scan_lines(lines(pad, pad, *cut), "a.log")
    joined = [e for e in scan.events if "SeqNum=42" in e.text]
    assert joined and joined[0].line == 3


def test_traceback_frames_reach_the_neighbourhood() -> None:
    text = [
        "Traceback (most recent call last):",
        '  File "/app/ckpt.py", line 9, in save',
        "    torch.save(state, path)",
        *[f'  File "/lib/f{i}.py", line {i}, in g' for i in range(20)],
        "OSError: [Errno 122] Disk quota exceeded",
    ]
    scan = scan_lines(lines(*text), "a.log", limits=ScanLimits(window_before=2))
    event = scan.events[-1]
    assert "torch.save(state, path)" in scan.neighbours[event]


def test_traceback_frames_are_not_progress() -> None:
    text = [
        "iter 1 loss 2.0",
        "OSError: [Errno 116] Stale file handle",
        "Traceback (most recent call last):",
    ]
    text += [f'  File "/t.py", line {i}, in training_step' for i in range(30)]
    text += ["RuntimeError: step failed"]
    scan = scan_lines(lines(*text), "a.log")
    assert scan.progress_after[scan.events[0]] <= 1  # the exception line itself, at most
