"""Mechanisms found while building the generalisation set, end to end through ``analyze_path``."""

from __future__ import annotations

from pathlib import Path

from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.model import EvidenceSource, Verdict
from trainmedic.offline.analyze import analyze_path


def _analyze(tmp_path: Path, text: str, name: str = "job.log") -> Verdict:
    path = tmp_path / name
    path.write_text(text)
    return analyze_path(path).verdict


def test_kernel_xid_outranks_the_weak_app_symptom_it_explains(tmp_path: Path) -> None:
    # The app's "unknown error" is printed first; the kernel's Xid 79 two seconds later names
    # the device and is strong enough to drain: it is the root cause.
    v = _analyze(
        tmp_path,
        "2025-04-04T12:00:01.120Z [rank4]: torch.AcceleratorError: CUDA error: unknown error\n"
        "2025-04-04T12:00:03.002Z kernel: NVRM: Xid (PCI:0000:4c:00): 79, pid=7712, "
        "name=python, GPU has fallen off the bus.\n",
    )
    assert str(v.category) == "gpu_hardware"
    assert v.root_cause is not None and v.root_cause.signature == "nvrm.xid"
    assert v.root_cause.evidence is EvidenceSource.KERNEL_LOG


def test_the_rank_that_printed_but_never_timed_out_is_the_culprit(tmp_path: Path) -> None:
    watchdog = (
        "[rank{r}]:[E330 02:10:01.000000001 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=24011, OpType=ALLGATHER, NumelIn=8, "
        "NumelOut=64, Timeout(ms)=1800000) ran for 1800088 milliseconds before timing out.\n"
    )
    text = "".join(watchdog.format(r=r) for r in (0, 1, 3))
    text += "[rank2]: building eval batches ...\n"
    v = _analyze(tmp_path, text)
    assert str(v.kind) == "hang"
    assert v.implicated.ranks == (2,)


def test_enomem_in_ib_registration_is_the_memlock_limit(tmp_path: Path) -> None:
    v = _analyze(
        tmp_path,
        "gpu-m02:2211:2290 [0] transport/net_ib.cc:1092 NCCL WARN NET/IB : ibv_reg_mr failed "
        "in 2 tries, last error: Cannot allocate memory\n",
    )
    assert str(v.category) == "system_software"
    assert v.root_cause is not None and v.root_cause.signature == "nccl.ib_memlock"


def test_loss_scale_at_its_floor_is_a_divergence(tmp_path: Path) -> None:
    v = _analyze(
        tmp_path,
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1\n"
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. "
        "Exiting run.\n",
    )
    assert v.failure and str(v.category) == "application"


def test_epoch_second_brackets_are_not_kernel_lines(tmp_path: Path) -> None:
    v = _analyze(
        tmp_path,
        "[1712003311.228100] [gpu-c07:4411:0]    ib_mlx5_log.c:177  UCX  ERROR Error on mlx5_1:1 "
        "QP 0x1a2f wqe[311]: Transport retry count exceeded (synd 0x15 vend 0x81) opcode SEND\n",
    )
    assert str(v.category) == "network_hardware"
    assert v.root_cause is not None and v.root_cause.evidence is EvidenceSource.APP_LOG


def test_store_connect_timeout_alone_is_a_cascade(tmp_path: Path) -> None:
    v = _analyze(
        tmp_path,
        "torch.distributed.DistNetworkError: The client socket has failed to connect to "
        "[master-0]:29500 (errno: 110 - Connection timed out).\n",
    )
    assert v.failure and str(v.category) == "unknown"
    assert v.confidence < 0.5


def test_a_launcher_reporting_a_sigkilled_worker_is_a_likely_host_oom(tmp_path: Path) -> None:
    v = _analyze(
        tmp_path,
        "mpirun noticed that process rank 3 with PID 4711 on node gpu07 exited on signal 9 "
        "(Killed).\n",
    )
    assert str(v.category) == "application" and v.confidence < 0.5
    assert v.implicated.ranks == (3,) and v.implicated.nodes == ("gpu07",)
    spawn = _analyze(
        tmp_path,
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal "
        "SIGKILL\n",
        "spawn.log",
    )
    assert spawn.failure and str(spawn.category) == "application"


def test_an_unknown_exception_ending_a_traceback_is_the_program(tmp_path: Path) -> None:
    v = _analyze(
        tmp_path,
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "train.py", line 3, in <module>\n'
        "[rank0]:     run()\n"
        "[rank0]: RuntimeError: CUDA error: operation not permitted when stream is capturing\n",
    )
    assert v.failure and str(v.category) == "application"
    assert v.confidence <= 0.5 and v.implicated.ranks == (0,)


def test_an_exception_line_outside_a_traceback_is_not_a_failure(tmp_path: Path) -> None:
    v = _analyze(tmp_path, "WARNING retrying: ConnectionError: peer busy\nstep 10 loss 1.2\n")
    assert not v.failure


def test_peer_transfer_errors_yield_to_the_peer_own_failure(tmp_path: Path) -> None:
    ib = (
        "gpu-s2:1201:1390 [0] transport/net_ib.cc:1699 NCCL WARN NET/IB : Got completion from "
        "peer 10.7.1.33<38812> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
    )
    oom = _analyze(
        tmp_path,
        ib + "[rank8]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4 GiB.\n",
    )
    assert str(oom.category) == "application" and oom.implicated.ranks == (8,)
    node = _analyze(tmp_path, ib + "srun: error: Node failure on gpu-h07\n", "node.log")
    assert str(node.category) == "node_hardware"
    alone = _analyze(tmp_path, ib, "alone.log")
    assert str(alone.category) == "network_hardware"


def test_pdsh_host_prefix_only_before_a_known_prefix() -> None:
    p = parse_prefix("node-c14: [rank6]: RuntimeError: x")
    assert (p.node, p.rank) == ("node-c14", 6)
    line = "gpu07: [Tue Mar 11 05:01:12 2025] NVRM: Xid (PCI:0000:b7:00): 79"
    assert line[parse_prefix(line).body_start :].startswith("NVRM: Xid")
    for text in ("RuntimeError: [rank3] x", "ValueError: 3: x", "WARNING: [rank0]: x"):
        assert parse_prefix(text).node is None, text


def test_a_traceback_python_ignored_is_no_failure(tmp_path: Path) -> None:
    ignored = (
        "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3a>\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/multiprocessing/process.py", line 149, in join\n'
        "    assert self._parent_pid == os.getpid(), 'can only join a child process'\n"
        "AssertionError: can only join a child process\n"
    )
    assert not _analyze(tmp_path, "step 100 loss 1.2\n" + ignored).failure
    oom = _analyze(
        tmp_path,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB.\n" + ignored,
        "oom.log",
    )
    assert str(oom.category) == "application" and oom.root_cause is not None
    assert oom.root_cause.line == 1


def test_an_oom_next_to_a_corrected_error_rate_xid_stays_the_program(tmp_path: Path) -> None:
    v = _analyze(
        tmp_path,
        "NVRM: Xid (PCI:0000:3b:00): 92, pid=1, name=python, High single-bit ECC error rate\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB.\n",
    )
    assert str(v.category) == "application"
