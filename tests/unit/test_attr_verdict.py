"""Attribution on small synthetic event sequences: primaries vs cascades, culprits, refinements."""

from __future__ import annotations

from trainmedic.core.attribute.facts import JobFacts
from trainmedic.core.attribute.verdict import attribute
from trainmedic.core.logparse.elastic import ChildFailure
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.model import Category, Event, EvidenceSource, Kind, Role


def ev(
    signature: str,
    line: int,
    text: str = "",
    *,
    category: Category = Category.UNKNOWN,
    role: Role = Role.PRIMARY,
    kind: Kind = Kind.CRASH,
    source: str = "app.log",
    **extra: object,
) -> Event:
    return Event(
        signature=signature,
        category=category,
        kind=kind,
        role=role,
        line=line,
        text=text or signature,
        source=source,
        **extra,  # type: ignore[arg-type]
    )


def timeout(line: int, rank: int, seq: int) -> Event:
    return ev(
        "nccl.watchdog_timeout",
        line,
        f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 ms",
        role=Role.CASCADE,
        kind=Kind.HANG,
        rank=rank,
    )


def test_no_events_no_failure() -> None:
    v = attribute([])
    assert (v.failure, v.kind, v.category) == (False, Kind.NONE, Category.UNKNOWN)


def test_earliest_primary_wins_and_cascades_never_root() -> None:
    events = [
        timeout(3, 1, 500),
        ev("python.key_error", 10, "KeyError: 'lr'", category=Category.APPLICATION),
        ev("cuda.oom", 20, "CUDA out of memory", category=Category.APPLICATION),
        timeout(30, 2, 500),
    ]
    v = attribute(events)
    assert v.root_cause is not None and v.root_cause.line == 10
    assert v.category is Category.APPLICATION and v.failure
    assert {e.line for e in v.cascades} == {3, 30}


def test_timestamps_order_across_files() -> None:
    late = ev("a", 1, category=Category.APPLICATION, source="r0.log", timestamp=200.0)
    early = ev("b", 50, category=Category.STORAGE, source="r1.log", timestamp=100.0)
    assert attribute([late, early]).root_cause == early


def test_kernel_hardware_outranks_the_cuda_symptom_it_explains() -> None:
    cuda = ev(
        "cuda.unknown_error", 5, "RuntimeError: CUDA error: unknown error", source="rank0.log"
    )
    xid = ev(
        "kernel.xid",
        900,
        "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        category=Category.GPU_HARDWARE,
        source="kern.log",
        evidence=EvidenceSource.KERNEL_LOG,
        strong=True,
        node="gpu7",
        gpu="0000:3b:00",
        xid=79,
    )
    v = attribute([cuda, xid])
    assert v.root_cause == xid
    assert v.category is Category.GPU_HARDWARE
    assert v.implicated.nodes == ("gpu7",) and v.implicated.gpus == ("0000:3b:00",)
    assert v.confidence >= 0.9


def test_kernel_hardware_much_later_does_not_explain() -> None:
    cuda = ev("cuda.x", 5, "CUDA error: unknown error", timestamp=1000.0, source="a.log")
    xid = ev(
        "kernel.xid",
        1,
        "NVRM: Xid 79",
        category=Category.GPU_HARDWARE,
        evidence=EvidenceSource.KERNEL_LOG,
        timestamp=5000.0,
        source="kern.log",
    )
    assert attribute([cuda, xid]).root_cause == cuda


def test_only_timeouts_culprit_is_the_rank_behind() -> None:
    v = attribute([timeout(1, 0, 501), timeout(2, 1, 501), timeout(3, 3, 480), timeout(4, 2, 501)])
    # timeouts and nothing else: the ranks' own code apart, as a guess (restart, never stop)
    assert v.failure and v.kind is Kind.HANG and v.category is Category.APPLICATION
    assert v.implicated.ranks == (3,)
    assert v.confidence < 0.5


def test_only_timeouts_culprit_is_the_rank_that_did_not_time_out() -> None:
    facts = JobFacts(ranks_seen=frozenset({0, 1, 2, 3}))
    v = attribute([timeout(1, 0, 501), timeout(2, 1, 501), timeout(4, 3, 501)], facts=facts)
    assert v.implicated.ranks == (2,)


def test_torchrun_root_cause_names_an_innocent_rank() -> None:
    table = (
        ChildFailure(
            line=10,
            exitcode=-15,
            rank=0,
            host="a",
            time="2024-01-01_10:00:05",
            root_cause_section=True,
        ),
        ChildFailure(line=20, exitcode=1, rank=5, host="b", time="2024-01-01_10:00:06"),
        ChildFailure(line=30, exitcode=-15, rank=6, host="b", time="2024-01-01_10:00:06"),
    )
    closed = ev("gloo.connection_closed", 2, "Connection closed by peer", role=Role.CASCADE)
    v = attribute([closed], facts=JobFacts(child_failures=table))
    assert v.implicated.ranks == (5,)
    assert "b" in v.implicated.nodes
    assert "SIGTERM victim" in v.basis


def test_network_cascade_only_is_network() -> None:
    ib = ev(
        "nccl.ib_flush",
        1,
        "NET/IB : Got completion with error 5",
        category=Category.NETWORK_HARDWARE,
        role=Role.CASCADE,
    )
    v = attribute([ib])
    assert v.category is Category.NETWORK_HARDWARE and v.confidence < 0.6


def test_setup_divergence_is_application() -> None:
    progress = ProgressSummary(reports=0)
    v = attribute([timeout(5, 1, 13)], facts=JobFacts(progress=progress))
    assert v.category is Category.APPLICATION and v.kind is Kind.HANG
    trained = ProgressSummary(reports=40, last_iteration=40)
    later = attribute([timeout(5, 1, 13)], facts=JobFacts(progress=trained))
    assert "during setup" not in later.basis and "timeouts and nothing else" in later.basis


def test_solo_phase_before_teardown_is_application() -> None:
    cancel = ev("slurm.step_cancelled", 3, "*** STEP 1.0 ON n1 CANCELLED AT", role=Role.TEARDOWN)
    bar = ProgressSummary(reports=2, last_label="Building index", last_elapsed_s=1750.0)
    v = attribute([cancel], facts=JobFacts(progress=bar))
    assert v.category is Category.APPLICATION
    epoch = ProgressSummary(reports=2, last_label="Epoch 3", last_elapsed_s=1750.0)
    assert attribute([cancel], facts=JobFacts(progress=epoch)).category is Category.UNKNOWN


def test_silence_after_init_is_a_first_collective_hang() -> None:
    facts = JobFacts(progress=ProgressSummary(init_complete_line=5, meaningful_after_init=0))
    v = attribute([], facts=facts)
    assert (v.failure, v.kind, v.category) == (True, Kind.HANG, Category.SYSTEM_SOFTWARE)
    busy = JobFacts(progress=ProgressSummary(init_complete_line=5, meaningful_after_init=50))
    assert not attribute([], facts=busy).failure


def test_sigkill_without_message_is_host_oom() -> None:
    table = (ChildFailure(line=4, exitcode=-9, local_rank=0),)
    v = attribute([], facts=JobFacts(child_failures=table))
    assert v.failure and v.category is Category.APPLICATION and v.confidence < 0.5


def test_strong_hardware_context_alone_still_counts() -> None:
    xid45 = ev(
        "kernel.xid",
        1,
        "NVRM: Xid (PCI:0000:dc:00): 45, caused by previous Xid 149",
        category=Category.GPU_HARDWARE,
        role=Role.CONTEXT,
        strong=True,
        evidence=EvidenceSource.KERNEL_LOG,
    )
    v = attribute([xid45])
    assert v.category is Category.GPU_HARDWARE and v.confidence <= 0.6


def test_first_collective_never_completing_is_the_platform() -> None:
    v = attribute([timeout(5, 0, 1), timeout(6, 1, 1)], facts=JobFacts(progress=ProgressSummary()))
    assert v.category is Category.SYSTEM_SOFTWARE and v.kind is Kind.HANG


def test_error_the_job_survived_is_not_the_cause() -> None:
    warning = ev("nccl.p2p", 3, "NCCL WARN Cuda failure 'peer access is not supported'")
    later = timeout(900, 0, 5000)
    facts = JobFacts(progress_after={warning: 500, later: 0})
    v = attribute([warning, later], facts=facts)
    assert v.root_cause is None or v.root_cause.signature != "nccl.p2p"
    assert "timeouts and nothing else" in v.basis and v.confidence < 0.5
    assert not attribute([warning], facts=JobFacts(progress_after={warning: 500})).failure
    assert attribute([warning], facts=JobFacts(progress_after={warning: 2})).failure


def test_kernel_noise_does_not_outrank_an_application_error() -> None:
    oom = ev(
        "cuda.oom", 5, "torch.OutOfMemoryError: CUDA out of memory.", category=Category.APPLICATION
    )
    aer = ev(
        "pcie.aer_nonfatal",
        1,
        "pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received",
        category=Category.NODE_HARDWARE,
        evidence=EvidenceSource.KERNEL_LOG,
        source="kern.log",
    )
    assert attribute([oom, aer]).category is Category.APPLICATION


def test_launcher_reporting_a_sigkill_is_host_oom() -> None:
    line = "['/usr/bin/python', '-u', 'train.py'] exits with return code = -9"
    launcher = ev("launcher.subprocess_failed", 2, line, role=Role.TEARDOWN)
    v = attribute([launcher])
    assert v.category is Category.APPLICATION and v.root_cause == launcher
    other = ev("launcher.subprocess_failed", 2, "exits with return code = 1", role=Role.TEARDOWN)
    assert attribute([other]).category is Category.UNKNOWN


def test_on_one_line_the_specific_signature_wins() -> None:
    generic = ev("nccl.unhandled_cuda_error", 4, "ncclUnhandledCudaError ... out of memory")
    specific = ev(
        "cuda.oom", 4, "ncclUnhandledCudaError ... out of memory", category=Category.APPLICATION
    )
    assert attribute([generic, specific]).root_cause == specific


def test_weak_kernel_hardware_context_explains_a_bare_hang() -> None:
    aer = ev(
        "pcie.aer_corrected",
        1,
        "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0",
        category=Category.NODE_HARDWARE,
        role=Role.CONTEXT,
        evidence=EvidenceSource.KERNEL_LOG,
        source="dmesg",
    )
    v = attribute([timeout(5, 0, 900), aer])
    assert v.category is Category.NODE_HARDWARE and v.confidence <= 0.4
    app_hint = ev(
        "nccl.ib_async",
        1,
        "NET/IB : Got async event",
        category=Category.NETWORK_HARDWARE,
        role=Role.CONTEXT,
    )
    assert attribute([app_hint]).failure is False
