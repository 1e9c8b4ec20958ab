"""Observations: what the sources (the imperative shell) tell the pure engine.

Every observation carries the time it was observed (Unix seconds) as a value, so the engine
never reads a clock. Node-scoped observations (kernel log, telemetry, node state) have no job;
the engine relates them to the jobs running on that node.

Two clocks: ``time`` is when the thing happened as far as the source can tell (a line's own
printed stamp when it has one), for ordering and reports; ``received`` is when the source read
it, on the service's own clock. Liveness (is the job still reporting?) uses ``received``: a
printed stamp can be in another zone, skewed, or hours old when a log is read again.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.core.model import EvidenceSource
from trainmedic.core.states import JobState, NodeState


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line from a job log (app) or a node's kernel log."""

    time: float
    text: str
    source: EvidenceSource
    path: str
    line_no: int
    job_id: str | None = None
    node: str | None = None
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """One training step reported by one rank (trainer line, Megatron/HF/Lightning, JSONL)."""

    time: float
    job_id: str
    iteration: int
    rank: int | None = None
    node: str | None = None
    step_time: float | None = None  # seconds for the whole step
    compute_time: float | None = None  # forward/backward on this rank
    wait_time: float | None = None  # time blocked in communication
    loss: float | None = None
    samples_per_s: float | None = None
    received: float | None = None  # when the source read it (None: same as ``time``)
    # A per-epoch bar (Lightning; ``logparse.progress.ProgressLine``): the count within its
    # epoch, the epoch its label names and the batches per epoch; the engine places it.
    epoch_step: int | None = None
    epoch: int | None = None
    epoch_len: int | None = None


@dataclass(frozen=True, slots=True)
class CheckpointSaved:
    time: float
    job_id: str
    iteration: int
    path: str = ""
    in_progress: bool = False  # a write has started but not yet completed
    received: float | None = None  # when the source read it (None: same as ``time``)


@dataclass(frozen=True, slots=True)
class JobStatus:
    """The scheduler's view of a job at one poll."""

    time: float
    job_id: str
    state: JobState
    nodes: tuple[str, ...] = ()
    attempt: int = 0
    exit_code: int | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class NodeStatus:
    time: float
    node: str
    state: NodeState
    reason: str = ""


@dataclass(frozen=True, slots=True)
class TelemetrySample:
    """One GPU metric from a DCGM-exporter-compatible endpoint (e.g. DCGM_FI_DEV_XID_ERRORS)."""

    time: float
    node: str
    gpu: str
    metric: str
    value: float


@dataclass(frozen=True, slots=True)
class SourceStale:
    """A source could not be read: its data is unknown, never a failure by itself."""

    time: float
    source: str
    detail: str
    job_id: str | None = None
    node: str | None = None


@dataclass(frozen=True, slots=True)
class SourceRecovered:
    """A source that was stale can be read again (same ``source`` name as its SourceStale)."""

    time: float
    source: str
    job_id: str | None = None
    node: str | None = None


Observation = (
    LogLine
    | Progress
    | CheckpointSaved
    | JobStatus
    | NodeStatus
    | TelemetrySample
    | SourceStale
    | SourceRecovered
)
