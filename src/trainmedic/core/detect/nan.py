"""NaN/inf detection: a non-finite loss in a progress report, or a NaN signature line.

A NaN does not crash the trainer by itself (exit code 0 unless it checks) and reaches every
rank on the next step, poisoning the following checkpoints; reporting it at the first
non-finite loss lets the policy stop before good checkpoints are overwritten.
"""

from __future__ import annotations

import math
import re

from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.model import Category, Event, Kind, Role
from trainmedic.core.observations import Progress

# Signature ids name NaN/inf loss or gradient-norm detections with one of these words.
_NAN_ID = re.compile(r"(?:^|[._-])(nan|inf|non[._-]?finite|nonfinite)(?:$|[._-])", re.IGNORECASE)


def nan_from_progress(progress: Progress, now: float) -> Anomaly | None:
    if progress.loss is None or math.isfinite(progress.loss):
        return None
    return Anomaly(
        kind=Kind.CRASH,
        job_id=progress.job_id,
        detected_at=now,
        since=progress.time,
        trigger=Trigger.NAN_LOSS,
        basis=f"loss is {progress.loss} at iteration {progress.iteration}",
        ranks=() if progress.rank is None else (progress.rank,),
        nodes=() if progress.node is None else (progress.node,),
        nan=True,
        category=Category.APPLICATION,
        iteration=progress.iteration,
    )


def is_nan_event(event: Event) -> bool:
    """A primary crash line whose signature id names NaN/inf (``nan.loss``, ``nan.grad_norm``);
    context lines such as fp16 loss-scale overflows (``nan.loss_scale_overflow``) are normal."""
    return (
        event.role is Role.PRIMARY
        and event.kind is Kind.CRASH
        and bool(_NAN_ID.search(event.signature))
    )


def nan_from_event(
    job_id: str, event: Event, now: float, iteration: int | None = None
) -> Anomaly | None:
    if not is_nan_event(event):
        return None
    return Anomaly(
        kind=Kind.CRASH,
        job_id=job_id,
        detected_at=now,
        since=event.timestamp if event.timestamp is not None else now,
        trigger=Trigger.NAN_LOG,
        basis=f"{event.signature}: {event.text[:200]}",
        ranks=() if event.rank is None else (event.rank,),
        nodes=() if event.node is None else (event.node,),
        evidence=(event,),
        nan=True,
        category=Category.APPLICATION,
        iteration=iteration,
    )
