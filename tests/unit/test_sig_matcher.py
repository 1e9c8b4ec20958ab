"""The matcher: same hits as a naive scan, quiet on healthy lines, events built right."""

from __future__ import annotations

import random

import pytest

from trainmedic.core.model import ActionHint, Category, Event, EvidenceSource, LinePrefix, Role
from trainmedic.core.signatures.catalogue import load_catalogue
from trainmedic.core.signatures.matcher import Hit, Matcher, default_matcher, normalize_pci

HEALTHY = [
    "[rank3]:[2025-03-01 10:00:01,123] iteration     1200/  500000 | consumed samples: 614400 |"
    " elapsed time per iteration (ms): 812.4 | learning rate: 2.999E-04 | global batch size:"
    "   512 | lm loss: 2.418721E+00 | loss scale: 65536.0 | grad norm: 0.412 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 |",
    "gpu-a01:81234:81390 [0] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7",
    "node1:123:456 [0] NCCL INFO Channel 00/02 : 0 1",
    "gpu-a01:81234:81390 [3] NCCL INFO Connected all rings",
    "gpu-a01:81234:81390 [3] NCCL INFO comm 0x55d0c0 rank 3 nranks 16 cudaDev 3 busId 4f000"
    " - Init COMPLETE",
    "{'loss': 1.7342, 'grad_norm': 0.88, 'learning_rate': 1.98e-05, 'epoch': 0.42}",
    "Epoch 3:  41%|████      | 410/1000 [02:13<03:11,  3.08it/s, loss=0.512, v_num=7]",
    "epoch 3 step 4100 loss 0.5121 lr 0.00019 tokens/s 182331",
    "[2025-03-01 10:00:05,001] [INFO] [logging.py:96:log_dist] [Rank 0] step=4100, skipped=0,"
    " lr=[0.00019]",
    "Saving checkpoint at iteration    4000 to /ckpt/run7",
    "  successfully saved checkpoint at iteration    4000 to /ckpt/run7",
    "0: Validation loss 1.9012 perplexity 6.69",
]

ERRORS = [
    "[rank5]:[E1104 11:02:17.1 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective"
    " operation timeout: WorkNCCL(SeqNum=4051, OpType=ALLREDUCE, NumelIn=8, NumelOut=8,"
    " Timeout(ms)=600000) ran for 600042 milliseconds before timing out.",
    "kernel: NVRM: Xid (PCI:0000:3B:00): 79, pid=20114, name=python, GPU has fallen off the bus.",
    "kernel: NVRM: Xid (PCI:0000:4e:00): 45, pid=88120, name=python, Ch 00000004"
    " caused by previous Xid 74",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "  exitcode  : -9 (pid: 77120)",
    "srun: error: gpu-07: task 3: Exited with exit code 1",
    "OSError: [Errno 28] No space left on device: '/ckpt/run7/iter_4000'",
    "Killed",
    "frame #3: <unknown function> + 0xd6df4 (0x7f1100aabdf4 in /lib/libstdc++.so.6)",
    "Traceback (most recent call last):",
]


def test_healthy_lines_produce_no_primary_hits() -> None:
    matcher = default_matcher()
    for line in HEALTHY:
        assert [h for h in matcher.match(line) if h.signature.role is Role.PRIMARY] == [], line


def test_catalogue_healthy_lines_produce_no_primary_hits() -> None:
    matcher = default_matcher()
    assert len(matcher.catalogue.healthy_lines) >= 20
    for line in matcher.catalogue.healthy_lines:
        assert [h for h in matcher.match(line) if h.signature.role is Role.PRIMARY] == [], line


def test_known_errors_hit() -> None:
    matcher = default_matcher()
    for line in ERRORS:
        assert matcher.match(line), line


def _mutations(rng: random.Random, base: list[str], n: int) -> list[str]:
    """Lines made from pieces of real-looking lines: splices, truncations, case flips."""
    out = []
    for _ in range(n):
        a, b = rng.choice(base), rng.choice(base)
        i, j = rng.randrange(len(a) + 1), rng.randrange(len(b) + 1)
        line = a[:i] + b[j:]
        if rng.random() < 0.2:
            line = line.swapcase()
        if rng.random() < 0.2:
            k = rng.randrange(len(line) + 1)
            line = line[:k] + rng.choice(["\x00", "é", "\t", "  ", "nan", "Error: "]) + line[k:]
        out.append(line)
    return out


def test_prefilter_gives_same_hits_as_naive_scan() -> None:
    matcher = default_matcher()
    examples = [e for s in matcher.catalogue.signatures for e in (*s.examples, *s.counter_examples)]
    base = HEALTHY + ERRORS + examples + list(matcher.catalogue.healthy_lines)
    rng = random.Random(20260101)
    long_lines = [" ".join(rng.choices(base, k=80)) for _ in range(20)]  # past the memo
    assert all(len(line) > 4096 for line in long_lines)
    for line in base + _mutations(rng, base, 3000) + long_lines:
        assert matcher.match(line) == matcher.match_naive(line), line


def test_hits_are_in_catalogue_order_with_groups() -> None:
    matcher = default_matcher()
    hits = matcher.match(ERRORS[1])
    ids = [h.signature.id for h in hits]
    order = [s.id for s in matcher.catalogue.signatures]
    assert ids == sorted(ids, key=order.index)
    xid_hit = next(h for h in hits if h.signature.id == "nvrm.xid")
    assert dict(xid_hit.groups) == {"pci": "0000:3B:00", "xid": "79"}
    assert all(value for _, value in xid_hit.groups)


def _event(line: str, signature_id: str, prefix: LinePrefix | None = None) -> Event:
    matcher = default_matcher()
    hit = next(h for h in matcher.match(line) if h.signature.id == signature_id)
    return matcher.to_event(
        hit,
        line=7,
        text=line,
        source="job.log",
        evidence=EvidenceSource.KERNEL_LOG,
        prefix=prefix or LinePrefix(),
    )


def test_xid_event_takes_bucket_from_table() -> None:
    event = _event(ERRORS[1], "nvrm.xid", LinePrefix(node="gpu-a01", timestamp=12.5))
    assert event.xid == 79
    assert event.gpu == "0000:3b:00"
    assert event.category is Category.GPU_HARDWARE
    assert event.action_hint is ActionHint.REBOOT_NODE
    assert event.strong is True
    assert event.node == "gpu-a01"
    assert event.timestamp == 12.5
    assert event.line == 7


def test_xid_cleanup_is_cascade_and_names_its_cause() -> None:
    cleanup = _event(ERRORS[2], "nvrm.xid")
    assert cleanup.xid == 45
    assert cleanup.role is Role.CASCADE
    cause = _event(ERRORS[2], "nvrm.xid_previous_cause")
    assert cause.xid == 74
    assert cause.role is Role.PRIMARY
    assert cause.action_hint is ActionHint.RESET_GPU


def test_groups_override_prefix_and_prefix_fills_gaps() -> None:
    line = "srun: error: gpu-07: task 3: Exited with exit code 1"
    event = _event(line, "slurm.task_exited", LinePrefix(rank=0, node="batch-host"))
    assert (event.rank, event.node) == (3, "gpu-07")
    plain = _event(
        "RuntimeError: CUDA error: unknown error", "cuda.unknown_error", LinePrefix(rank=4)
    )
    assert (plain.rank, plain.node) == (4, None)


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("0000:3B:00", "0000:3b:00"),
        ("0000:3b:00.0", "0000:3b:00"),
        ("00000000:AF:00.0", "0000:af:00"),
        ("3b:00", "0000:3b:00"),
        ("garbage", "garbage"),
    ],
)
def test_normalize_pci(raw: str, normal: str) -> None:
    assert normalize_pci(raw) == normal


def test_matcher_from_explicit_catalogue_and_hit_group() -> None:
    matcher = Matcher(load_catalogue())
    hit = matcher.match("srun: error: Node failure on gpu-203")[0]
    assert isinstance(hit, Hit)
    assert hit.group("node") == "gpu-203"
    assert hit.group("rank") is None
    assert matcher.match("") == ()
    assert default_matcher() is default_matcher()


@pytest.mark.timeout(30)
def test_huge_lines_stay_linear_and_keep_head_and_tail() -> None:
    matcher = default_matcher()
    for junk in ("RuntimeError: CUDA error: " * 400_000, "gloo pair.cc Timed out " * 400_000):
        matcher.match(junk)  # must return quickly: the timeout guards against blow-ups
    tail = "x" * 5_000_000 + "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert "cuda.illegal_memory_access" in [h.signature.id for h in matcher.match(tail)]
    assert matcher.match("\x00" * 1_000_000) == ()


def test_lines_with_odd_characters() -> None:
    matcher = default_matcher()
    for line in ("\udcff\udcfe Killed", "caf\u00e9 \u2603 loss: nan", "\x00\x01\x02", "\t"):
        assert matcher.match(line) == matcher.match_naive(line)


def test_pci_group_names_gpus_only() -> None:
    root_port = (
        "pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction"
    )
    gpu = "nvidia 0000:CA:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction"
    assert _event(root_port, "pcie.aer_fatal").gpu is None
    assert _event(gpu, "pcie.aer_fatal").gpu == "0000:ca:00"
    assert _event("mlx5_core 0000:1a:00.0 ibp26s0: Link down", "mlx5.link_down").gpu is None


# Lines shaped like real reports, written apart from the catalogue's own examples: each must
# reach the mechanism named (prefixes from srun -l, torchrun and syslog included).
REALISTIC = [
    (
        "3: [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. "
        "GPU 3 has a total capacity of 39.39 GiB of which 3.94 MiB is free.",
        "cuda.out_of_memory",
    ),
    (
        "Nov 14 22:13:05 gpu-a02 kernel: [812345.123456] NVRM: Xid (PCI:0000:b7:00): 31, pid=4412, "
        "name=python, Ch 00000010, intr 00000000. MMU Fault",
        "nvrm.xid",
    ),
    (
        "Nov 14 22:13:05 gpu-a02 kernel: NVRM: Xid (PCI:0000:b7:00): 94, pid='<unknown>', "
        "name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No",
        "nvrm.xid",
    ),
    ("[rank1]: RuntimeError: NCCL Error 2: unhandled system error", "nccl.system_error"),
    (
        "gpu-b11:4401:4533 [6] NCCL INFO NET/IB : Got completion from peer 10.12.0.7<57331> with "
        "error 12, opcode 0, len 0, vendor err 129 (Recv)",
        "nccl.ib_completion_error",
    ),
    (
        "0: slurmstepd: error: *** STEP 99812.0 ON gpu-b11 CANCELLED AT 2025-05-05T05:05:05 DUE TO "
        "TIME LIMIT ***",
        "slurm.time_limit",
    ),
    (
        "slurmstepd: error: Detected 2 oom_kill events in StepId=99812.batch. Some of the step "
        "tasks have been OOM Killed.",
        "oom.slurm_oom_kill",
    ),
    (
        "[2025-05-05 05:05:05,000] torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
        "(exitcode: -9) local_rank: 2 (pid: 88123) of binary: /usr/bin/python",
        "proc.exit_sigkill",
    ),
    (
        "OSError: [Errno 28] No space left on device: '/checkpoints/step_4000/optim.pt'",
        "storage.no_space",
    ),
    (
        "RuntimeError: unable to write to file </torch_4512_3178021433_0>: No space left on device",
        "shm.insufficient",
    ),
    (
        "[Rank 4] Timeout at NCCL work: 3120, last enqueued NCCL work: 3121, last completed NCCL "
        "work: 3119.",
        "nccl.last_completed",
    ),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( "
        "handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
        "cuda.cublas_execution_failed",
    ),
    ("[  612.000001] mce: [Hardware Error]: Machine check: Processor context corrupt", "mce.fatal"),
    (
        "kernel: EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#0_DIMM#0",
        "edac.uncorrected",
    ),
    ("ModuleNotFoundError: No module named 'apex'", "py.import_error"),
    ("[rank0]: KeyError: 'lr_scheduler'", "py.key_error"),
    ('  File "train.py", line 12, in <module>', None),
    ("iteration 5000/10000 | lm loss: nan | loss scale: 1.0 | grad norm: nan |", "nan.loss"),
    (
        "RuntimeError: Rank 0 successfully reached monitoredBarrier, but received errors while "
        "waiting for send/recv from ranks 3.",
        None,
    ),
    (
        "torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: "
        "Connection reset by peer",
        "net.connection_reset",
    ),
    ("NCCL WARN NET/IB : mlx5_3:1 Got async event : port error", "nccl.ib_port_error"),
    ("nfs: server storage01 not responding, still trying", "storage.nfs_not_responding"),
    ("OSError: [Errno 5] Input/output error", "storage.io_error"),
    (
        "PermissionError: [Errno 13] Permission denied: '/mnt/shared/ckpt/latest'",
        "storage.permission_denied",
    ),
    ("srun: error: gpu-b12: task 9: Exited with exit code 1", "slurm.task_exited"),
    ("Bus error (core dumped)", "shm.bus_error"),
    (
        "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
        "cuda.devices_unavailable",
    ),
]


@pytest.mark.parametrize(("line", "expected"), REALISTIC)
def test_realistic_lines_reach_their_mechanism(line: str, expected: str | None) -> None:
    ids = [h.signature.id for h in default_matcher().match(line)]
    if expected is None:
        assert not [i for i in ids if default_matcher().catalogue.by_id(i).role is Role.PRIMARY]
    else:
        assert expected in ids, ids
