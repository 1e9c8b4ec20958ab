"""The data model shared by every stage: frozen dataclasses and ``str`` enums.

Stage boundaries (matcher -> attribution -> advice -> store -> executor) pass only these
immutable values, so the pure core can be tested without I/O and reused by ``analyze``,
the simulator and the live service alike.

Error taxonomy (after torch.distributed.elastic's user / platform / infra split):

=================  ==============================================  =====================
Category           What failed                                     Who fixes it
=================  ==============================================  =====================
gpu_hardware       a GPU: Xid, ECC, fallen off the bus, NVLink     ops: reset / RMA GPU
network_hardware   IB/RoCE/Ethernet link, NIC, switch              ops: fabric team
node_hardware      host CPU/memory/PCIe, node died                 ops: repair node
system_software    driver, container limits (/dev/shm), IOMMU     ops: platform config
storage            filesystem full, EIO, stale handle              ops: storage team
application        the job's own code, config or data              the user
scheduler          preemption, time limit, cancellation            nobody: just requeue
unknown            not enough evidence                             restart and watch
=================  ==============================================  =====================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Category(StrEnum):
    """Root-cause category of an interruption (see the table in the module docstring)."""

    GPU_HARDWARE = "gpu_hardware"
    NETWORK_HARDWARE = "network_hardware"
    NODE_HARDWARE = "node_hardware"
    SYSTEM_SOFTWARE = "system_software"
    STORAGE = "storage"
    APPLICATION = "application"
    SCHEDULER = "scheduler"
    UNKNOWN = "unknown"

    def is_hardware(self) -> bool:
        return self in _HARDWARE


_HARDWARE = frozenset({Category.GPU_HARDWARE, Category.NETWORK_HARDWARE, Category.NODE_HARDWARE})


class Kind(StrEnum):
    """How the interruption showed itself."""

    CRASH = "crash"
    HANG = "hang"
    STRAGGLER = "straggler"
    NONE = "none"


class Role(StrEnum):
    """What a matched line says about causality.

    ``primary`` lines can be a root cause; ``cascade`` lines are consequences seen on other
    ranks (timeouts everywhere, "closed by peer"); ``teardown`` is the noise of shutting down
    (SIGTERM, ChildFailedError banners); ``context`` refines another event's category (an Xid
    13 next to an illegal memory access) but is never a cause on its own.
    """

    PRIMARY = "primary"
    CASCADE = "cascade"
    TEARDOWN = "teardown"
    CONTEXT = "context"


class Action(StrEnum):
    """What to do with the job."""

    RESTART = "restart"
    RESTART_EXCLUDING = "restart_excluding"
    STOP = "stop"
    NONE = "none"


class ActionHint(StrEnum):
    """A signature's suggestion for the node/GPU it names (NVSentinel's Xid buckets)."""

    REBOOT_NODE = "reboot_node"
    RESET_GPU = "reset_gpu"
    RESTART_APP = "restart_app"
    CHECK_NETWORK = "check_network"
    CHECK_STORAGE = "check_storage"
    FIX_CONFIG = "fix_config"
    FIX_CODE = "fix_code"
    REQUEUE = "requeue"
    IGNORE = "ignore"
    CONTACT_SUPPORT = "contact_support"
    NONE = "none"


class EvidenceSource(StrEnum):
    """Where a piece of evidence came from. Drain needs a system source, never app stdout."""

    APP_LOG = "app_log"
    KERNEL_LOG = "kernel_log"
    GPU_TELEMETRY = "gpu_telemetry"
    SCHEDULER = "scheduler"
    PROGRESS = "progress"

    def is_system(self) -> bool:
        return self in (
            EvidenceSource.KERNEL_LOG,
            EvidenceSource.GPU_TELEMETRY,
            EvidenceSource.SCHEDULER,
        )


@dataclass(frozen=True, slots=True)
class LinePrefix:
    """What the structure of a line says about who printed it and when."""

    rank: int | None = None
    node: str | None = None
    timestamp: float | None = None  # Unix seconds when the line carries a usable date
    body_start: int = 0  # offset of the message after the recognised prefixes


@dataclass(frozen=True, slots=True)
class Event:
    """One log line matched by one signature, with the entities its capture groups named."""

    signature: str
    category: Category
    kind: Kind
    role: Role
    line: int  # 1-based line number within ``source``
    text: str
    source: str = ""
    evidence: EvidenceSource = EvidenceSource.APP_LOG
    timestamp: float | None = None
    rank: int | None = None
    node: str | None = None
    gpu: str | None = None  # GPU index, UUID or PCI address
    xid: int | None = None
    action_hint: ActionHint = ActionHint.NONE
    strong: bool = False  # strong hardware evidence: enough to drain a node
    likely: bool = False  # the category is what this message usually means, not what it proves

    def justifies_drain(self) -> bool:
        """Strong evidence from a system source (kernel log, telemetry, scheduler): the one
        rule for draining a node, never a line seen only in the job's own output."""
        return self.strong and self.evidence.is_system()


@dataclass(frozen=True, slots=True)
class Implicated:
    nodes: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    gpus: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Advice:
    """Intent, not actuation: an adapter turns this into scheduler commands."""

    action: Action
    basis: str
    exclude_nodes: tuple[str, ...] = ()
    drain_nodes: tuple[str, ...] = ()
    # Drains beyond the circuit breaker's limit were held back: the service trips the breaker
    # (drains stay advice only until an operator resets it; see core.policy.breaker).
    breaker_trip: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of attribution for one job attempt (or one analysed input)."""

    failure: bool
    kind: Kind
    category: Category
    confidence: float
    root_cause: Event | None = None
    implicated: Implicated = field(default_factory=Implicated)
    cascades: tuple[Event, ...] = ()
    basis: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must be in [0, 1], got {self.confidence}")


NO_FAILURE = Verdict(failure=False, kind=Kind.NONE, category=Category.UNKNOWN, confidence=0.0)
