"""What the progress lines of a log say about how far the job got (built by ``tracker``)."""

from __future__ import annotations

from dataclasses import dataclass


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
    # Every worded line was NCCL's own debug output (NCCL INFO / WARN): no line of the job,
    # its launcher or its framework, so the log is an excerpt of NCCL's lines.
    only_nccl_lines: bool = False
    # NCCL/RCCL setup lines seen (the communicator began forming), and the non-blank lines
    # after the last of them that are not NCCL's: a log that ends inside NCCL setup.
    nccl_setup_seen: bool = False
    meaningful_after_nccl: int = 0
    nccl_setup_before_warning: bool = False  # NCCL INFO setup lines preceded its first WARN
    # A channel connected over the network transport ("... via NET/IB/0") while NCCL printed
    # no WARN and no error return trace ("init.cc:815 -> 1"): the bootstrap, the topology
    # exchange and a connection between the nodes worked ("Connected all rings" is the
    # timeline's nccl_connected).
    nccl_net_connected_clean: bool = False
