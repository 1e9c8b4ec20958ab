"""Collective timeouts: what the ranks say about each other tells an application desync from a
peer that died or a fabric that stalled (pure analysis, and through ``analyze``)."""

from __future__ import annotations

from pathlib import Path

from trainmedic.core.attribute.collective import collective_finding, nccl_trace_desync, op_name
from trainmedic.core.logparse.collective import CollectiveTrace, CollectiveTracker, FrameOp
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Category, Event, Kind, Role
from trainmedic.offline.analyze import analyze_path


def timeout(rank: int, seq: int, op: str = "ALLREDUCE", line: int = 10) -> Event:
    return Event(
        signature="nccl.watchdog_timeout",
        category=Category.UNKNOWN,
        kind=Kind.HANG,
        role=Role.CASCADE,
        line=line,
        text=f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        f"OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800090 ms",
        source="job.log",
        rank=rank,
    )


def test_op_names_share_one_vocabulary() -> None:
    assert op_name("_ALLGATHER_BASE") == op_name("AllGather") == op_name("all_gather_into_tensor")
    assert op_name("_REDUCE_SCATTER_BASE") == op_name("reduce_scatter_tensor") == "reduce_scatter"
    assert op_name("ALLREDUCE") == "all_reduce"


def test_ranks_in_different_collective_types_are_a_desync() -> None:
    found = collective_finding([timeout(0, 40, "ALLREDUCE"), timeout(1, 40, "ALLGATHER")], None)
    assert found is not None and found.category is Category.APPLICATION
    assert found.kind is Kind.HANG and 0.5 <= found.confidence < 0.7


def test_same_collective_everywhere_says_nothing_here() -> None:
    assert collective_finding([timeout(0, 40), timeout(1, 40), timeout(2, 40)], None) is None
    # a rank behind (lower SeqNum) stays for the culprit logic, not a desync verdict
    assert collective_finding([timeout(0, 501), timeout(3, 480)], None) is None


def test_nccl_trace_ops_differ_at_one_opcount() -> None:
    tracker = CollectiveTracker()
    lines = [
        "h1:45006:45006 [0] NCCL INFO AllReduce: opCount 28c sendbuff 0x1 recvbuff 0x1 count 9 "
        "datatype 7 op 0 root 0 comm 0x55be [nranks=4] stream 0x55",
        "h1:45006:45006 [0] NCCL INFO AllReduce: opCount 28d sendbuff 0x1 recvbuff 0x1 count 9 "
        "datatype 7 op 0 root 0 comm 0x55be [nranks=4] stream 0x55",
        "h1:45012:45012 [2] NCCL INFO AllGather: opCount 28d sendbuff 0x1 recvbuff 0x1 count 9 "
        "datatype 0 op 0 root 0 comm 0x559c [nranks=4] stream 0x55",
    ]
    for n, line in enumerate(lines, 1):
        assert tracker.wants(line)
        tracker.observe(n, line)
    found = nccl_trace_desync(tracker.trace())
    assert found is not None and found.category is Category.APPLICATION
    assert "28d" in found.basis


def test_nccl_trace_of_two_communicators_is_not_compared() -> None:
    tracker = CollectiveTracker()
    for n, (op, comm) in enumerate((("AllReduce", "0xa"), ("AllGather", "0xb")), 1):
        tracker.observe(
            n, f"h1:7:7 [0] NCCL INFO {op}: opCount 5 sendbuff 0x1 comm {comm} [nranks=4] stream 0"
        )
    tracker.observe(
        3, "h1:8:8 [1] NCCL INFO AllReduce: opCount 5 sendbuff 0x1 comm 0xc [nranks=4] stream 0"
    )
    assert nccl_trace_desync(tracker.trace()) is None


def test_frames_in_another_collective_than_the_timed_out_one() -> None:
    trace = CollectiveTrace(frame_ops=(FrameOp(8, "all_reduce"),))
    found = collective_finding([timeout(0, 2059, "ALLGATHER")], trace)
    assert found is not None and found.category is Category.APPLICATION
    same = CollectiveTrace(frame_ops=(FrameOp(8, "all_gather"),))
    assert collective_finding([timeout(0, 2059, "ALLGATHER")], same) is None


def test_training_loop_ended_before_the_timeout() -> None:
    ended = Timeline(finished_line=3, source="job.log")
    found = collective_finding([timeout(0, 90, line=5)], None, (ended,))
    assert found is not None and "training loop had reported its end" in found.basis
    later = Timeline(finished_line=9, source="job.log")
    assert collective_finding([timeout(0, 90, line=5)], None, (later,)) is None


def test_one_rank_in_another_phase() -> None:
    evaluating = ProgressSummary(reports=3, last_label="Running predictions on rank=0")
    found = collective_finding([timeout(1, 90)], None, (), evaluating)
    assert found is not None and found.category is Category.APPLICATION
    training = ProgressSummary(reports=3, last_label="Epoch 3")
    assert collective_finding([timeout(1, 90)], None, (), training) is None


def test_analyser_note_is_a_desync() -> None:
    trace = CollectiveTrace(notes=((4, "Not all ranks joining collective 5 at entry 4"),))
    found = collective_finding([timeout(1, 5)], trace)
    assert found is not None and found.confidence >= 0.55


def test_analyze_rank_waiting_in_all_reduce_while_allgather_timed_out(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(
        "step 10 loss 1.0\n"
        '  File "/w/trainer/stats.py", line 193, in get_global_statistics\n'
        "    dist.all_reduce(sum_and_count, dist.ReduceOp.SUM)\n"
        "[E ProcessGroupNCCL.cpp:467] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=2059, OpType=ALLGATHER, Timeout(ms)=1800000) ran for 1801398 ms\n"
    )
    verdict = analyze_path(path).verdict
    assert verdict.category is Category.APPLICATION and verdict.kind is Kind.HANG
    assert verdict.basis.startswith("mechanism (collective)")


def test_analyze_fabric_cascade_is_not_called_a_desync(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(
        "Evaluating: 100%|##########| 40/40 [00:10<00:00, 4.0it/s]\n"
        "w0:311:520 [0] transport/net_ib.cc:1699 NCCL WARN NET/IB : Got completion from peer "
        "10.9.0.4<40122> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=90, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600012 ms\n"
    )
    verdict = analyze_path(path).verdict
    assert verdict.category is not Category.APPLICATION, verdict.basis
