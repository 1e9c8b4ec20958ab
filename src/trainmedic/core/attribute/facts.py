"""What attribution may know besides matched events: the job's shape and progress.

All optional: the live engine may pass only events; ``analyze`` fills in what it saw in the
files. Kept as plain values so attribution stays a pure function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainmedic.core.logparse.elastic import ChildFailure
from trainmedic.core.model import Event


@dataclass(frozen=True, slots=True)
class ProgressSummary:
    """How far the job got, as seen in progress lines (see ``logparse.progress``)."""

    reports: int = 0  # progress lines seen
    first_iteration: int | None = None
    last_iteration: int | None = None
    last_label: str = ""  # description of the last tqdm bar ("Epoch 3", "Tokenizing")
    last_elapsed_s: float | None = None  # the last bar's elapsed time
    last_step_time: float | None = None
    last_checkpoint: int | None = None
    nonfinite_at: int | None = None  # first iteration whose loss / grad norm was NaN or inf
    init_complete_line: int | None = None  # "All distributed processes registered", NCCL init
    meaningful_after_init: int = 0  # non-blank lines after the init marker
    # NCCL/RCCL setup lines seen (the communicator began forming), and the non-blank lines
    # after the last of them that are not NCCL's: a log that ends inside NCCL setup.
    nccl_setup_seen: bool = False
    meaningful_after_nccl: int = 0
    nccl_setup_before_warning: bool = False  # NCCL INFO setup lines preceded its first WARN


@dataclass(frozen=True, slots=True)
class JobFacts:
    progress: ProgressSummary | None = None
    child_failures: tuple[ChildFailure, ...] = ()
    ranks_seen: frozenset[int] = frozenset()
    # Text around each event (its neighbours and, for a traceback's exception line, the frames):
    # context rules read it to tell a checkpoint write from an NCCL shm segment.
    neighbours: Mapping[Event, str] = field(default_factory=dict)
    # Progress lines the same file printed after each event (absent: unknown).
    progress_after: Mapping[Event, int] = field(default_factory=dict)
