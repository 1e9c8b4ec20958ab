"""Structured tool output (ibstat, nvidia-smi -q, dcgmi diag, sacct/squeue/scontrol, kubectl,
IPMI SEL): each parser finds what failed in its format and stays quiet on healthy output."""

from __future__ import annotations

from trainmedic.core.logparse.ipmi import SelParser
from trainmedic.core.logparse.kube import POD_STATUSES, PodTableParser
from trainmedic.core.logparse.scan import scan_lines
from trainmedic.core.logparse.structured import Finding, StructuredScan
from trainmedic.core.model import Category, EvidenceSource, Role


def findings(text: str) -> list[Finding]:
    scan = StructuredScan()
    out: list[Finding] = []
    for number, line in enumerate(text.splitlines(), 1):
        out.extend(scan.feed(number, line, scan.wants(line)))
    return out


IBSTAT = """CA 'mlx5_0'
        CA type: MT4123
        Number of ports: 1
        Port 1:
                State: Active
                Physical state: LinkUp
                Rate: 200
                Link layer: InfiniBand
CA 'mlx5_1'
        CA type: MT4123
        Port 1:
                State: Down
                Physical state: Disabled
                Link layer: InfiniBand
"""


def test_ibstat_names_the_port_that_is_not_active() -> None:
    found = findings(IBSTAT)
    assert [(f.signature, f.category, f.line) for f in found] == [
        ("ibstat.port_not_active", Category.NETWORK_HARDWARE, 12)
    ]
    assert found[0].text.startswith("mlx5_1:")


def test_ibv_devinfo_and_ibstatus_formats() -> None:
    devinfo = (
        "hca_id:\tmlx5_3\n\ttransport:\tInfiniBand (0)\n\t\tport:\t1\n"
        "\t\t\tstate:\t\tPORT_DOWN (1)\n"
    )
    assert [f.signature for f in findings(devinfo)] == ["ibstat.port_not_active"]
    status = (
        "Infiniband device 'mlx5_0' port 1 status:\n\tstate:\t\t 2: INIT\n"
        "\tphys state:\t 5: LinkUp\n"
    )
    assert [f.category for f in findings(status)] == [Category.NETWORK_HARDWARE]
    active = "Infiniband device 'mlx5_0' port 1 status:\n\tstate:\t\t 4: ACTIVE\n"
    assert findings(active) == []


def test_a_state_line_outside_an_hca_block_is_nothing() -> None:
    assert findings("Worker state: Down for maintenance\n        State: Down\n") == []


NVSMI = """==============NVSMI LOG==============
GPU 00000000:3B:00.0
    Product Name                          : Tesla V100-SXM2-32GB
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 1
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
        Aggregate
            SRAM Uncorrectable            : 1
    Retired Pages
        Single Bit ECC                    : 0
        Double Bit ECC                    : 0
        Pending Page Blacklist            : No
GPU 00000000:86:00.0
    ECC Errors
        Volatile
            SRAM Uncorrectable            : 0
            DRAM Uncorrectable            : 0
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 0
        Pending                           : Yes
        Remapping Failure Occurred        : No
"""


def test_nvidia_smi_uncorrectable_ecc_and_pending_remap_per_gpu() -> None:
    found = findings(NVSMI)
    assert [(f.signature, f.gpu) for f in found] == [
        ("nvsmi.ecc_uncorrectable", "00000000:3B:00.0"),
        ("nvsmi.remap_pending", "00000000:86:00.0"),
    ]
    assert all(f.category is Category.GPU_HARDWARE for f in found)


def test_nvidia_smi_old_layout_double_bit_and_healthy_counters() -> None:
    old = (
        "GPU 0000:04:00.0\n    ECC Errors\n        Volatile\n            Single Bit\n"
        "                Total                 : 3\n            Double Bit\n"
        "                Total                 : 2\n"
    )
    assert [f.signature for f in findings(old)] == ["nvsmi.ecc_uncorrectable"]
    healthy = NVSMI.replace(": 1", ": 0").replace(
        "Pending                           : Yes", "Pending : No"
    )
    assert findings(healthy) == []


def test_dcgmi_diag_fail_rows_gpu_or_platform() -> None:
    table = (
        "| Diagnostic                | Result                                         |\n"
        "| Blacklist                 | Pass                                           |\n"
        "| CUDA Main Library         | Fail                                           |\n"
        "| Memory                    | Fail - GPU: 0                                  |\n"
    )
    found = findings(table)
    assert [(f.signature, f.category) for f in found] == [
        ("dcgmi.diag_fail_platform", Category.SYSTEM_SOFTWARE),
        ("dcgmi.diag_fail_gpu", Category.GPU_HARDWARE),
    ]


SACCT = """       JobID    JobName  Partition    Account  AllocCPUS      State ExitCode
------------ ---------- ---------- ---------- ---------- ---------- --------
4412           pretrain        gpu       proj         64    TIMEOUT      0:0
4412.batch        batch                  proj         64  CANCELLED     0:15
4413           pretrain        gpu       proj         64  COMPLETED      0:0
"""


def test_sacct_state_column_job_and_step() -> None:
    found = findings(SACCT)
    assert [(f.signature, f.role, f.evidence) for f in found] == [
        ("slurm_state.timeout", Role.PRIMARY, EvidenceSource.SCHEDULER),
        ("slurm_state.cancelled", Role.CASCADE, EvidenceSource.SCHEDULER),
    ]


def test_sacct_parsable_squeue_and_scontrol() -> None:
    parsable = (
        "JobID|JobName|State|ExitCode\n77|train|NODE_FAIL|1:0\n77.0|python|OUT_OF_MEMORY|0:125\n"
    )
    assert [f.category for f in findings(parsable)] == [
        Category.NODE_HARDWARE,
        Category.APPLICATION,
    ]
    squeue = (
        "JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        " 5510       gpu    train    alice PR    1:02:03      2 gpu[01-02]\n"
        " 5511       gpu    train    alice  R    1:02:03      2 gpu[03-04]\n"
    )
    assert [f.signature for f in findings(squeue)] == ["slurm_state.preempted"]
    scontrol = "   JobId=88 JobName=pretrain\n   JobState=CANCELLED Reason=None Dependency=(null)\n"
    assert [f.category for f in findings(scontrol)] == [Category.SCHEDULER]


def test_pod_table_statuses() -> None:
    table = (
        "NAME                         READY   STATUS      RESTARTS   AGE\n"
        "trainer-master-0             0/1     Evicted     0          19h\n"
        "trainer-worker-1             0/1     OOMKilled   3          12m\n"
        "trainer-worker-2             1/1     Running     0          19h\n"
    )
    found = findings(table)
    assert [(f.signature, f.category) for f in found] == [
        ("kube.pod_evicted", Category.SCHEDULER),
        ("kube.pod_oomkilled", Category.APPLICATION),
    ]
    assert "Running" not in POD_STATUSES and PodTableParser().active is False


def test_sel_records_asserted_failures_only() -> None:
    sel = SelParser()
    record = "  1a | 03/12/2024 | 10:00:01 | Memory #0x87 | Uncorrectable ECC | Asserted"
    found = sel.feed(1, record)
    assert found is not None and (found.category, found.role) == (
        Category.NODE_HARDWARE,
        Role.PRIMARY,
    )
    assert sel.feed(2, record.replace("| Asserted", "| Deasserted")) is None
    corrected = (
        "  1c | 03/12/2024 | 10:00:01 | Memory #0x87 | Correctable ECC logging limit reached"
        " | Asserted"
    )
    context = sel.feed(3, corrected)
    assert context is not None and context.role is Role.CONTEXT
    info = "  1d | 03/12/2024 | 10:00:01 | System Event #0x83 | Timestamp Clock Sync | Asserted"
    assert sel.feed(4, info) is None
    drive = "  1e | 03/12/2024 | 10:00:01 | Drive Slot #0x20 | Drive Fault | Asserted"
    assert (found := sel.feed(5, drive)) is not None and found.category is Category.STORAGE


def test_scan_turns_findings_into_events_with_prefix_facts() -> None:
    lines = [line.encode() for line in IBSTAT.splitlines()]
    scan = scan_lines(iter(lines), "ibstat.txt")
    events = [e for e in scan.events if e.signature == "ibstat.port_not_active"]
    assert len(events) == 1 and events[0].line == 12
    assert events[0].category is Category.NETWORK_HARDWARE
