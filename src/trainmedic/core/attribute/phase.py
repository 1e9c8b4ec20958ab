"""Mechanisms read from *where* a job was when it failed, not from one error line.

Used only when no primary error was printed (the logs hold only cascades, teardown noise, or
nothing at all), so each verdict here is of low confidence:

* **setup divergence**: every collective timeout names one of the first collectives and no
  training step was ever reported: the ranks parted ways during setup (one rank raised, or
  loads/prepares something alone) and the rest waited until the watchdog fired. The job's
  own code, not the fabric.
  When not even the first collective completed, the transport never worked instead: the
  platform's configuration (as for silence after init, below).
* **solo phase outlasted the timeout**: the last thing printed is a non-training progress bar
  (dataset preparation, tokenising, evaluation set) that had run for many minutes when the job
  was torn down: one rank worked alone while the others sat in a collective until the
  timeout (default 30 min) killed the step.
* **killed first**: the earliest non-SIGTERM exit in torchrun's table is a SIGKILL that no
  line explains, and the other ranks only timed out later: a kill nobody logged sending is, far
  most often, the host OOM killer (the job's memory use: application). Unless the kernel logs
  of the job's nodes were read and hold no OOM record (the kernel logs every kill its OOM
  killer makes, and an OOM record would have been the root cause): then what is known is
  said, killed by signal 9 from outside the job, sender unknown (unknown, low confidence:
  restarted, never stopped or drained on it).
* **silence after init**: the process group formed, then nothing: not one step, no error.
  A hang in the first collective; with NCCL that is usually broken peer-to-peer (PCI ACS /
  IOMMU), i.e. the platform's configuration. Not when the log holds NCCL's debug lines and
  nothing of the job's own (no launcher, framework or script line): an excerpt of NCCL's
  output, whose end is where the paste ended.
* **fabric never carried a step**: an InfiniBand/RoCE completion error (a timeout: transport
  retry exceeded) after NCCL's setup lines (or nccl-tests' device table) and before any
  training step or benchmark result: the NICs never
  managed to talk over RDMA (RoCE GID index, routing between switches, the wrong HCAs), which
  the threads reporting it resolve by configuration. A link that dies mid-run comes after
  steps and stays the network's; a lone error line says nothing about when, and stays so too.
* **died in NCCL setup**: a process exited non-zero, printing no error, while NCCL's setup lines
  were the last output and before any step: a native crash of the communication stack.
* **communicator init failed**: only cascades (a socket a peer closed), NCCL's return trace
  running through its bootstrap: the communicator never formed, the platform's side.
* **stuck in NCCL setup**: the log ends among NCCL's own setup lines (NCCL_DEBUG=INFO output),
  the communicator never reported "Init COMPLETE", no step and no error: the ranks could not
  finish connecting (peer-to-peer, IOMMU, the network interface NCCL picked): the platform's
  configuration again, with less certainty. Not when a channel had already connected over
  the network with no NCCL warning or error trace: what could not connect did connect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from trainmedic.core.attribute.culprit import collective_position, first_real_failure
from trainmedic.core.attribute.evidence import EvidenceFinding
from trainmedic.core.attribute.facts import JobFacts
from trainmedic.core.logparse.elastic import SIGKILL_EXITS, ChildFailure
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.model import Category, Event, Kind

SETUP_COLLECTIVES = 100
"""Collectives up to this sequence number count as setup (init, broadcast of parameters)."""

SOLO_PHASE_S = 600.0
"""A non-training bar running this long before the teardown is a phase one rank did alone."""

AFTER_INIT_LINES = 1
"""Worded lines after the process group formed that still leave the log silent after init
(one: the backend's name or a banner); more, and the job went on with its own setup (device
hints, rank placement), the excerpt merely ends there."""

_TRAINING_LABEL = re.compile(r"(?i)epoch|train|step|iter|batch|fit")


@dataclass(frozen=True, slots=True)
class PhaseFinding:
    category: Category
    kind: Kind
    confidence: float
    basis: str
    evidence: Event | None = None  # the line that shows it, when one does


def setup_divergence(
    timeouts: Sequence[Event], progress: ProgressSummary | None
) -> PhaseFinding | None:
    if progress is None or progress.reports > 0 or not timeouts:
        return None
    positions = [collective_position(e.text) for e in timeouts]
    known = [p for p in positions if p is not None]
    if not known or len(known) != len(positions) or max(known) >= SETUP_COLLECTIVES:
        return None
    if max(known) <= 0:
        return PhaseFinding(
            Category.SYSTEM_SOFTWARE,
            Kind.HANG,
            0.3,
            "the very first collective never completed: the transport between the GPUs never "
            "worked (peer-to-peer blocked by PCI ACS / IOMMU, or the wrong network interface)",
        )
    return PhaseFinding(
        Category.APPLICATION,
        Kind.HANG,
        0.35,
        f"collective timeout at sequence number {max(known) + 1}, before any training step: "
        "the ranks diverged during setup (one rank failed or worked alone)",
    )


def solo_phase(progress: ProgressSummary | None) -> PhaseFinding | None:
    if progress is None or not progress.last_label or progress.last_elapsed_s is None:
        return None
    if _TRAINING_LABEL.search(progress.last_label) or progress.last_elapsed_s < SOLO_PHASE_S:
        return None
    minutes = progress.last_elapsed_s / 60
    return PhaseFinding(
        Category.APPLICATION,
        Kind.HANG,
        0.35,
        f"'{progress.last_label}' ran alone for {minutes:.0f} min before the teardown: "
        "the other ranks waited in a collective until its timeout",
    )


def silence_after_init(progress: ProgressSummary | None) -> PhaseFinding | None:
    if progress is None or progress.init_complete_line is None or progress.reports > 0:
        return None
    if progress.meaningful_after_init > AFTER_INIT_LINES:
        return None
    if progress.only_nccl_lines:
        # Only NCCL's own debug lines (a paste of its "Init COMPLETE" rows): the job's output
        # is not in the excerpt at all, so where it ends says nothing about the job stopping.
        return None
    return PhaseFinding(
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
        0.3,
        "the process group formed, then no step and no error: a hang in the first "
        "collective, typically GPU peer-to-peer broken by PCI ACS / IOMMU settings",
    )


FABRIC_TIMEOUT_SIGNATURES = frozenset({"nccl.ib_completion_error"})


def fabric_never_worked(
    root: Event, progress: ProgressSummary | None, bench_rows: int | None = None
) -> PhaseFinding | None:
    """``bench_rows``: result rows of a collective benchmark (nccl-tests) that printed its
    device table (its own sign that the communicator was set up); ``None`` without one."""
    if root.signature not in FABRIC_TIMEOUT_SIGNATURES:
        return None
    if bench_rows is not None:
        if bench_rows > 0:
            return None
    elif progress is None or progress.reports > 0 or not progress.nccl_setup_before_warning:
        return None
    return PhaseFinding(
        Category.SYSTEM_SOFTWARE,
        root.kind,
        0.5,
        "the RDMA transport timed out right after NCCL set up, before any training step: the "
        "NICs never talked over IB/RoCE (GID index, routing, HCA selection), a configuration "
        "problem rather than a link that failed mid-run",
        root,
    )


def stuck_in_nccl_setup(progress: ProgressSummary | None) -> PhaseFinding | None:
    if progress is None or not progress.nccl_setup_seen or progress.reports > 0:
        return None
    if progress.init_complete_line is not None or progress.meaningful_after_nccl > 3:
        return None
    if progress.nccl_net_connected_clean:
        # A channel already connected between the nodes with no warning and no error trace:
        # the bootstrap, the topology exchange and the network worked; a log ending while
        # the channels connect is an excerpt of a start, not a start that stalled.
        return None
    return PhaseFinding(
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
        0.25,
        "the log ends inside NCCL's communicator setup (never 'Init COMPLETE'), no step and no "
        "error: the ranks could not finish connecting (peer-to-peer / IOMMU, network interface)",
    )


_SIGKILL_TEXT = re.compile(
    r"(?i)(?:exit ?code|exit status|return ?code|exited with code)\s*[:=]?\s*(?:-9|137)\b"
    r"|Signal 9 \(SIGKILL\)|signal: killed\b|terminated with signal SIGKILL\b"
    r"|exited on signal 9\b"
)


def killed_first(
    failures: Sequence[ChildFailure],
    teardown: Sequence[Event] = (),
    kernel_logs: frozenset[str] = frozenset(),
) -> PhaseFinding | None:
    first = first_real_failure(failures)
    if first is None:
        # No torchrun table: a launcher's own line (DeepSpeed, accelerate, srun) may say it.
        killed = next((e for e in teardown if _SIGKILL_TEXT.search(e.text)), None)
        if killed is None:
            return None
        what = (
            f"the launcher reports a SIGKILLed worker ({killed.signature} at line {killed.line}) "
            "and no error line"
        )
        if kernel_logs:
            return _killed_from_outside(what, kernel_logs, evidence=killed)
        return PhaseFinding(
            Category.APPLICATION,
            Kind.CRASH,
            0.3,
            f"{what}: most likely the host OOM killer",
            evidence=killed,
        )
    if first.exitcode not in SIGKILL_EXITS:
        return None
    if first.rank is not None:
        who = f"rank {first.rank}"
    elif first.local_rank is not None:
        who = f"local rank {first.local_rank}"
    else:
        who = "a worker"
    what = f"{who} was SIGKILLed first (exitcode {first.exitcode}) with no error line"
    if kernel_logs:
        return _killed_from_outside(what, kernel_logs)
    return PhaseFinding(
        Category.APPLICATION,
        Kind.CRASH,
        0.35,
        f"{what}: most likely the host OOM killer",
    )


def _killed_from_outside(
    what: str, kernel_logs: frozenset[str], evidence: Event | None = None
) -> PhaseFinding:
    """A SIGKILL the kernel logs of the job's nodes say the OOM killer did not send."""
    nodes = ", ".join(sorted(kernel_logs))
    return PhaseFinding(
        Category.UNKNOWN,
        Kind.CRASH,
        0.3,
        f"{what}, and no OOM record in the kernel log of {nodes}: killed by signal 9 "
        "(SIGKILL) from outside the job, sender unknown",
        evidence=evidence,
    )


def died_in_nccl_setup(
    progress: ProgressSummary | None, bench_rows: int | None = None
) -> PhaseFinding | None:
    """A process exited non-zero (failure lines that name no category: a launcher's "process
    returned a non-zero exit code") while NCCL's setup lines were the last thing it printed,
    before any step or benchmark row. Python errors print themselves; a death that prints
    nothing inside the communication library is a native crash of the stack: a shared-memory
    segment too small for NCCL's buffers (SIGBUS in a container), peer mappings the GPUs ran
    out of, a library or driver mismatch."""
    if progress is None or not progress.nccl_setup_seen or progress.reports > 0:
        return None
    if bench_rows:
        return None
    return PhaseFinding(
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
        0.3,
        "a process exited non-zero with no error of its own while NCCL was still setting up "
        "(no step, no benchmark row): a native crash in the communication stack (shared "
        "memory too small, peer mappings exhausted, a library or driver mismatch)",
    )


_EXIT_REPORTS = frozenset({"slurm.task_exited", "elastic.failure_exitcode"})
"""Context lines of a launcher saying a process exited non-zero (no cause of their own)."""


def died_in_setup(
    found: EvidenceFinding | None, events: Sequence[Event], facts: JobFacts
) -> PhaseFinding | None:
    """Failure lines that name no category, or a launcher's exit report, while NCCL's setup
    was the last thing printed: a death, not a hang, in the setup."""
    if found is not None and found.category is not Category.UNKNOWN:
        return None
    exits = [e for e in events if e.signature in _EXIT_REPORTS]
    evidence = exits[0] if exits else found.event if found is not None else None
    if evidence is None:
        return None
    # A benchmark that printed its result table's header had its communicators set up.
    if any(t.bench_started and t.nccl_connected for t in facts.timelines):
        return None
    benches = [t.bench_rows for t in facts.timelines if t.bench_started]
    finding = died_in_nccl_setup(facts.progress, max(benches, default=None))
    return None if finding is None else replace(finding, evidence=evidence)


_CLOSED_BY_PEER = re.compile(r"(?i)closed by (?:the )?remote|reset by peer|connection abort")
_COMM_INIT_TRACE = re.compile(r"\b(?:bootstrap|init)\.cc:\d+ -> [1-9]|NCCL WARN [Bb]ootstrap")


def comm_init_failed(
    cascades: Sequence[Event], neighbours: Mapping[Event, str], progress: ProgressSummary | None
) -> PhaseFinding | None:
    """Only cascades (a socket closed or reset by a peer), and NCCL's return-code trace under
    the first runs through its bootstrap or communicator init, before any step: the
    communicator was never formed. The ranks could not rendezvous over NCCL's own sockets (a
    connection from outside the job, a firewall, the wrong interface, NCCL versions that
    differ between nodes): the platform, not a link that failed mid-run."""
    if progress is not None and progress.reports > 0:
        return None
    for event in cascades:
        # A refused connect is a listener that is gone (a peer that died): not this.
        if not _CLOSED_BY_PEER.search(event.text):
            continue
        if "NCCL" in event.text and _COMM_INIT_TRACE.search(neighbours.get(event, "")):
            return PhaseFinding(
                Category.SYSTEM_SOFTWARE,
                Kind.CRASH,
                0.35,
                "NCCL's error returned through its bootstrap / communicator init before any "
                "step: the communicator never formed (a connection from outside the job, a "
                "firewall, the wrong interface, NCCL versions differing between nodes)",
                evidence=event,
            )
    return None
