"""Hang detection: no progress report for longer than the job's own reporting cadence allows.

The threshold follows the intervals between the job's progress *reports* (a framework prints
one line per N iterations: Megatron every 100, the HF Trainer every 500, Lightning every 50):
``max(floor, k x q(intervals) + margin)`` (``DetectorConfig`` documents each term). Liveness is
measured on the service's clock, from when each report was *read*, never from the time printed
in the line (another zone, a skewed clock, or hours old when a log is read again).

Refinements that keep it both fast and free of false alarms:

* until the cadence is known, and before the first report of an attempt, the job has a
  start-up grace (learned from the job's observed start-ups, generous before any);
* a checkpoint in progress extends the window until its ``saved`` line (or a generous cap),
  because a training loop prints nothing while it writes;
* an NCCL/gloo timeout line (an event of kind ``hang``, e.g. gloo's ``Timed out waiting``)
  ends the wait at once: the communicator has already decided;
* a job the scheduler does not show RUNNING is never hung, and neither is a job one of whose
  liveness sources (its log, the scheduler) cannot be read: its silence is unknown.
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
    last_progress: float | None  # printed time of the last report; None: none in this attempt
    report_interval_s: float | None = None  # q(intervals between reports); None: not known yet
    startup_grace_s: float | None = None  # the grace in force; None: config.startup_grace_s
    last_seen: float | None = None  # when the last report was read; None: last_progress
    checkpoint_started: float | None = None  # a `checkpoint begin` not yet followed by `saved`
    last_checkpoint_saved: float | None = None
    iteration: int | None = None
    nodes: tuple[str, ...] = ()
    p99_step_s: float | None = None  # for the basis only
    unknown_sources: tuple[str, ...] = ()  # liveness sources that cannot be read now
    watch_from: float | None = None  # a liveness source came back: silence counts from here


def hang_threshold(
    report_interval_s: float | None, config: DetectorConfig, grace_s: float | None = None
) -> float:
    """Seconds without a report before a job is hung; the start-up grace while the cadence
    is not known yet."""
    if report_interval_s is None or not math.isfinite(report_interval_s):
        return max(config.hang_floor_s, config.startup_grace_s if grace_s is None else grace_s)
    return max(config.hang_floor_s, config.hang_k * report_interval_s + config.hang_margin_s)


def check_hang(inputs: HangInputs, config: DetectorConfig) -> Anomaly | None:
    """An anomaly when the job has made no progress for longer than its threshold."""
    if inputs.running_since is None or inputs.unknown_sources:
        return None
    grace = config.startup_grace_s if inputs.startup_grace_s is None else inputs.startup_grace_s
    watch_from = -math.inf if inputs.watch_from is None else inputs.watch_from
    if inputs.last_progress is None:
        start = max(inputs.running_since, watch_from)
        if inputs.now - start <= grace:
            return None
        return Anomaly(
            kind=Kind.HANG,
            job_id=inputs.job_id,
            detected_at=inputs.now,
            since=inputs.running_since,
            trigger=Trigger.NO_FIRST_ITERATION,
            basis=(
                f"no first progress report {inputs.now - start:.1f}s after start "
                f"(start-up grace {grace:.0f}s)"
            ),
            nodes=inputs.nodes,
        )
    threshold = hang_threshold(inputs.report_interval_s, config, grace)
    last = inputs.last_progress if inputs.last_seen is None else inputs.last_seen
    if inputs.last_checkpoint_saved is not None:
        last = max(last, inputs.last_checkpoint_saved)
    last = max(last, watch_from)
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
            f"({_explain(inputs, config, grace)}){during}"
        ),
        nodes=inputs.nodes,
        iteration=inputs.iteration,
    )


def _explain(inputs: HangInputs, config: DetectorConfig, grace: float) -> str:
    interval = inputs.report_interval_s
    if interval is None or not math.isfinite(interval):
        return f"report cadence not known yet: start-up grace {grace:.0f}s"
    q = "max" if config.hang_quantile >= 1.0 else f"p{config.hang_quantile * 100:g}"
    return (
        f"max(floor {config.hang_floor_s:g}s, {config.hang_k:g} x {q} report interval "
        f"{interval:.3f}s + margin {config.hang_margin_s:g}s); p99 step "
        f"{_fmt(inputs.p99_step_s)}"
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
