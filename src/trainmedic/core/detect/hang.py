"""Hang detection: no progress for max(k x recent p99 step time, floor).

Three refinements keep it both fast and free of false alarms:

* a checkpoint in progress extends the window until its ``saved`` line (or a generous cap),
  because a training loop prints nothing while it writes;
* an NCCL/gloo timeout line (an event of kind ``hang``, e.g. gloo's ``Timed out waiting``)
  ends the wait at once: the communicator has already decided;
* a job that has not printed its first iteration is given a start-up grace, and a job the
  scheduler does not show RUNNING is never hung.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.model import Event, Kind, Role


@dataclass(frozen=True, slots=True)
class HangInputs:
    """What the hang rule needs to know about one job at one instant."""

    job_id: str
    now: float
    running_since: float | None  # None: the job is not RUNNING
    last_progress: float | None  # None: no iteration yet in this attempt
    p99_step_s: float | None
    checkpoint_started: float | None = None  # a `checkpoint begin` not yet followed by `saved`
    last_checkpoint_saved: float | None = None
    iteration: int | None = None
    nodes: tuple[str, ...] = ()


def hang_threshold(p99_step_s: float | None, config: DetectorConfig) -> float:
    if p99_step_s is None or not math.isfinite(p99_step_s):
        return config.hang_floor_s
    return max(config.hang_k * p99_step_s, config.hang_floor_s)


def check_hang(inputs: HangInputs, config: DetectorConfig) -> Anomaly | None:
    """An anomaly when the job has made no progress for longer than its threshold."""
    if inputs.running_since is None:
        return None
    if inputs.last_progress is None:
        if inputs.now - inputs.running_since <= config.startup_grace_s:
            return None
        return Anomaly(
            kind=Kind.HANG,
            job_id=inputs.job_id,
            detected_at=inputs.now,
            since=inputs.running_since,
            trigger=Trigger.NO_FIRST_ITERATION,
            basis=(
                f"no first iteration {inputs.now - inputs.running_since:.1f}s after start "
                f"(grace {config.startup_grace_s:.0f}s)"
            ),
            nodes=inputs.nodes,
        )
    threshold = hang_threshold(inputs.p99_step_s, config)
    last = inputs.last_progress
    if inputs.last_checkpoint_saved is not None:
        last = max(last, inputs.last_checkpoint_saved)
    deadline = last + threshold
    if inputs.checkpoint_started is not None:
        deadline = max(deadline, inputs.checkpoint_started + config.checkpoint_cap_s)
    if inputs.now <= deadline:
        return None
    during = " (checkpoint write exceeded its cap)" if inputs.checkpoint_started else ""
    return Anomaly(
        kind=Kind.HANG,
        job_id=inputs.job_id,
        detected_at=inputs.now,
        since=inputs.last_progress,
        trigger=Trigger.NO_PROGRESS,
        basis=(
            f"no progress for {inputs.now - last:.1f}s > threshold {threshold:.1f}s "
            f"(max({config.hang_k:g} x p99 step {_fmt(inputs.p99_step_s)}, "
            f"floor {config.hang_floor_s:g}s)){during}"
        ),
        nodes=inputs.nodes,
        iteration=inputs.iteration,
    )


def is_comm_timeout(event: Event) -> bool:
    """A communication timeout (primary watchdog or cascading `Timed out waiting`)."""
    return event.kind is Kind.HANG and event.role in (Role.PRIMARY, Role.CASCADE)


def hang_from_event(
    job_id: str,
    event: Event,
    now: float,
    last_progress: float | None,
    iteration: int | None = None,
) -> Anomaly | None:
    """A hang detected at once from a timeout line, without waiting for the threshold."""
    if not is_comm_timeout(event):
        return None
    primary = event.role is Role.PRIMARY
    if last_progress is not None:
        since = last_progress
    else:
        since = event.timestamp if event.timestamp is not None else now
    return Anomaly(
        kind=Kind.HANG,
        job_id=job_id,
        detected_at=now,
        since=since,
        trigger=Trigger.COMM_TIMEOUT,
        basis=f"communication timeout {event.signature}: {event.text[:200]}",
        # A cascading timeout is printed by the ranks that waited, i.e. the innocent ones:
        # naming the culprit is attribution's job, so only a primary line names its rank.
        ranks=(event.rank,) if primary and event.rank is not None else (),
        nodes=(event.node,) if primary and event.node is not None else (),
        evidence=(event,),
        iteration=iteration,
    )


def _fmt(seconds: float | None) -> str:
    return "n/a" if seconds is None or not math.isfinite(seconds) else f"{seconds:.3f}s"
