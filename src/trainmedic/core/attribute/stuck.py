"""Hangs that no error line reports: where a process was stuck, read from its shape.

Used only when nothing above spoke (no primary error, no cascade, no teardown), so each
verdict is a low-confidence hang:

* **a stack dump**: a faulthandler or py-spy dump of a process is how a hang gets reported
  (nobody dumps a process that progresses). The innermost frames of the main thread say
  where it waited: inside NCCL's communicator setup, the ranks could not connect (the
  platform's configuration, as ``phase.stuck_in_nccl_setup``); inside the rendezvous
  (``init_process_group``, a TCP store), a rank never joined (the launch configuration);
  anywhere else (a collective, a stream synchronize, autograd's backward, a framework's
  hooks) the ranks took different paths through the program or its framework: the
  application. A dump right after "Fatal Python error" is a crash report, not a hang.
* **the rendezvous never completed**: the ranks printed that they were forming the process
  group (DeepSpeed's "Initializing TorchBackend", Lightning's "initializing ddp", torchrun's
  rendezvous), then the log ends: no line saying the group formed, no NCCL setup, no step,
  no error. A rank that never joined, or an address/port/world size the ranks disagree on:
  the launch configuration. (A group that formed and then fell silent is
  ``phase.silence_after_init``; one that ends inside NCCL's setup,
  ``phase.stuck_in_nccl_setup``.)
* **the first collective never returned**: torch warned, at the group's first collective (a
  barrier), that it guessed each rank's GPU, and the log ends there: no NCCL line after it,
  no step, no error. ProcessGroupNCCL builds its communicator lazily inside that first
  collective, so the ranks are stuck in NCCL's setup (peer-to-peer over PCIe with ACS / an
  IOMMU, the transport or interface NCCL picked): the platform's configuration, as
  ``phase.stuck_in_nccl_setup``. The warning alone is no failure (every start without a
  ``device_id`` prints it); a wrong GPU mapping it warns of would show as NCCL's "Duplicate
  GPU detected", a line of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.logparse.stackdump import StackDump
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Category, Kind

INNERMOST = 4
"""Frames of the main thread, innermost first, that say where it waited."""

RENDEZVOUS_TAIL = 4
"""At most this many lines after the last "forming the group" line for a log that ends there."""

_NCCL_SETUP = re.compile(r"ncclCommInit|_new_process_group_helper|comm_split|ProcessGroupNCCL\(")
_RENDEZVOUS = re.compile(
    r"init_process_group|rendezvous|_store_based_barrier|TCPStore|_create_c10d_store"
    r"|init_distributed|_init_dist_connection"
)


def stuck_in_stack_dump(dumps: Sequence[StackDump]) -> PhaseFinding | None:
    dump = next((d for d in dumps if not d.after_fatal), None)
    if dump is None:
        return None
    main = dump.main_thread()
    if main is None:
        return None
    inner = main.frames[:INNERMOST]
    where = " <- ".join(inner)
    shown = f"a thread dump (line {dump.line}) shows the main thread in {where}"
    innermost = " ".join(inner)
    if _NCCL_SETUP.search(innermost):
        return PhaseFinding(
            Category.SYSTEM_SOFTWARE,
            Kind.HANG,
            0.3,
            f"{shown}: stuck inside NCCL's communicator setup, the ranks could not connect "
            "(peer-to-peer / IOMMU, the network interface)",
        )
    if _RENDEZVOUS.search(innermost):
        return PhaseFinding(
            Category.APPLICATION,
            Kind.HANG,
            0.3,
            f"{shown}: waiting in the rendezvous for ranks that never joined (the launch "
            "configuration: addresses, ports, world size)",
        )
    return PhaseFinding(
        Category.APPLICATION,
        Kind.HANG,
        0.35,
        f"{shown}, with no error: the process waited on its peers or its device (a collective, "
        "a synchronize) that never completed, the ranks having taken different paths through "
        "the program or its framework",
    )


def rendezvous_never_completed(
    timelines: Sequence[Timeline], progress: ProgressSummary | None
) -> PhaseFinding | None:
    if progress is not None and (progress.reports > 0 or progress.nccl_setup_seen):
        return None
    for tl in timelines:
        start = tl.init_started_line
        if start is None or (tl.init_done_line is not None and tl.init_done_line > start):
            continue
        if tl.lines - start > RENDEZVOUS_TAIL or tl.points:
            continue
        return PhaseFinding(
            Category.APPLICATION,
            Kind.HANG,
            0.3,
            f"the ranks began forming the process group (line {start}) and the log ends there: "
            "no rank reported it formed, no NCCL setup, no step, no error: a rendezvous that "
            "never completed (a rank that never joined; addresses, ports or world size of the "
            "launch configuration)",
        )
    return None


def first_collective_never_returned(
    timelines: Sequence[Timeline], progress: ProgressSummary | None
) -> PhaseFinding | None:
    if progress is not None and (progress.reports > 0 or progress.nccl_setup_seen):
        return None
    for tl in timelines:
        guess = tl.device_guess_line
        if guess is None or tl.nccl_connected or tl.points:
            continue
        if tl.lines - guess > RENDEZVOUS_TAIL:
            continue
        return PhaseFinding(
            Category.SYSTEM_SOFTWARE,
            Kind.HANG,
            0.3,
            f"the ranks entered their first collective (torch guessed their GPUs, line {guess}) "
            "and the log ends there: no NCCL line, no step, no error. NCCL builds its "
            "communicator inside that first collective, so the ranks could not finish "
            "connecting (peer-to-peer / IOMMU, the transport or interface NCCL chose)",
        )
    return None
