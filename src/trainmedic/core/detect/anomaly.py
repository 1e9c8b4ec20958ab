"""What a detector reports: an :class:`Anomaly`, a frozen value the engine hands to attribution.

An anomaly says *that* something is wrong with a job and *when* it started; attribution
(``trainmedic.core.attribute``) says *why*. ``since`` is when the problem began as far as the
detector can tell (the last progress for a hang, the first slow step for a straggler, the
failing observation for a crash), ``detected_at`` the engine time at which it was noticed, so
``detected_at - since`` is the detection latency.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from trainmedic.core.model import Category, Event, Kind


class Trigger(StrEnum):
    """Which rule raised the anomaly."""

    JOB_STATE = "job_state"  # the scheduler reports a failed state
    NODE_STATE = "node_state"  # the scheduler reports a node of the job down or failing
    FATAL_LOG = "fatal_log"  # a primary crash event while the job runs
    NO_PROGRESS = "no_progress"  # no iteration for longer than the hang threshold
    NO_FIRST_ITERATION = "no_first_iteration"  # no iteration within the startup grace
    COMM_TIMEOUT = "comm_timeout"  # an NCCL/gloo timeout line cut the hang window short
    SLOW_STEPS = "slow_steps"  # step time above the baseline for a window
    NAN_LOSS = "nan_loss"  # a non-finite loss in a progress line
    NAN_LOG = "nan_log"  # a NaN/inf signature line


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: Kind
    job_id: str
    detected_at: float
    since: float
    trigger: Trigger
    basis: str
    ranks: tuple[int, ...] = ()
    nodes: tuple[str, ...] = ()
    evidence: tuple[Event, ...] = ()
    nan: bool = False
    category: Category | None = None  # set when the detector alone knows it (NaN: application)
    ratio: float | None = None  # straggler: recent step time / baseline
    iteration: int | None = None  # the last iteration seen when it was raised

    @property
    def latency(self) -> float:
        return self.detected_at - self.since
