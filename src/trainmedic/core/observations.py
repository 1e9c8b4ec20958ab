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

import dataclasses
import operator
import typing
from collections.abc import Callable
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
class ProgressRun:
    """Consecutive plain progress lines of one job log, one rank and node (the trainer's
    ``<ISO stamp> [rankR] node=N iter=I loss=L step_s=S ...``), column by column: what the
    ``Progress`` and ``LogLine`` of each line would carry, without an object per line. A
    live service reads most of a healthy job's lines as such runs (``sources.joblog``);
    ``expand`` gives the per-line observations, which the engine treats alike."""

    job_id: str
    path: str
    rank: int
    node: str
    received: float  # when the lines were read
    first_line_no: int  # the lines are numbered on from it
    texts: tuple[str, ...]
    times: tuple[float, ...]  # each line's time (``Progress.time``)
    stamps: tuple[float, ...]  # each line's printed stamp
    iterations: tuple[int, ...]
    losses: tuple[float, ...]  # finite (a non-finite loss is no plain line)
    step_times: tuple[float, ...]
    compute_times: tuple[float, ...] | None = None  # with wait_times, or neither
    wait_times: tuple[float, ...] | None = None
    samples_per_s: tuple[float, ...] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def progress_at(self, i: int) -> Progress:
        compute, wait, rate = self.compute_times, self.wait_times, self.samples_per_s
        return Progress(
            time=self.times[i],
            job_id=self.job_id,
            iteration=self.iterations[i],
            rank=self.rank,
            node=self.node,
            step_time=self.step_times[i],
            compute_time=None if compute is None else compute[i],
            wait_time=None if wait is None else wait[i],
            loss=self.losses[i],
            samples_per_s=None if rate is None else rate[i],
            received=self.received,
        )

    def line_at(self, i: int) -> LogLine:
        return LogLine(
            time=self.times[i],
            text=self.texts[i],
            source=EvidenceSource.APP_LOG,
            path=self.path,
            line_no=self.first_line_no + i,
            job_id=self.job_id,
            node=self.node,
            rank=self.rank,
        )

    def points(self) -> list[tuple[int, float, float, float]]:
        """(iteration, loss, printed stamp, step time) of each line: its timeline point."""
        return list(zip(self.iterations, self.losses, self.stamps, self.step_times, strict=True))

    def expand(self) -> list[Progress | LogLine]:
        """The observations of each line, in the order the per-line source makes them."""
        out: list[Progress | LogLine] = []
        for i in range(len(self.texts)):
            out.append(self.progress_at(i))
            out.append(self.line_at(i))
        return out


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
    | ProgressRun
    | CheckpointSaved
    | JobStatus
    | NodeStatus
    | TelemetrySample
    | SourceStale
    | SourceRecovered
)


def _reduce_by_fields(obs: Observation) -> tuple[type, tuple[object, ...]]:
    """Pickled as the class and its fields in order, rebuilt by the class itself: a reader
    process sends every line as an observation (``sources.reader_process``), and the
    generated ``__getstate__``/``__setstate__`` of a slotted dataclass look its fields up
    anew for each object, which cost the service a tenth of its time."""
    cls = type(obs)
    return cls, _FIELD_GETTERS[cls](obs)


def _getter(cls: type) -> Callable[[object], tuple[object, ...]]:
    names = [f.name for f in dataclasses.fields(cls)]
    get = operator.attrgetter(*names)
    if len(names) == 1:
        return lambda obs: (get(obs),)
    return get


_FIELD_GETTERS: dict[type, Callable[[object], tuple[object, ...]]] = {}
for _cls in typing.get_args(Observation):
    _FIELD_GETTERS[_cls] = _getter(_cls)
    setattr(_cls, "__reduce__", _reduce_by_fields)  # noqa: B010 - on the class, for pickle
