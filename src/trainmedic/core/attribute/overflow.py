"""A dynamic loss scaler that keeps overflowing: the mixed-precision run diverged.

Dynamic loss scaling (DeepSpeed, Apex AMP, fairseq, Megatron, trainers on torch's GradScaler)
skips a step whose gradients overflowed and halves the scale; after a window of clean steps it
doubles it again. Occasional skips are the scaler probing upward (a skip every ~1000-2000
steps, the scale growing back between them) and a start's burst of skips is the scaler
calibrating down from its initial 2^16-2^32; both are healthy. A run of skips with no
increase between them that the log ends in (no training after it) is the gradients being
inf/NaN step after step: the optimisation diverged, before any floor stopped the job (the
catalogue's ``nan.loss_scale_minimum`` / ``nan.loss_scale_collapse`` read the floor).

The run (``logparse/loss_scale.py``) counts as divergence when it holds ``RUN_MIN`` skips with
the scale only going down, or the scale fell ``DROP_MIN``-fold within it; a run that opened
the file and left the scale at ``CALIBRATED_MIN`` or more is a calibration, not a divergence.
A judgement from the log's shape: confidence ``CONFIDENCE`` (``DEEP_CONFIDENCE`` when the
scale was driven below the calibrated range), under the stop threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.logparse.loss_scale import ScalerRun
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Category, Event, Kind

RUN_MIN = 5
"""Skipped steps in a row, the scale never raised, that make a divergence."""
DROP_MIN = 2.0**8
"""A scale that fell this many times over within one run."""
CALIBRATED_MIN = 256.0
"""Scales a healthy fp16 run settles at stay at or above this (a start's calibration from
2^16-2^32 stops well above it); a run that drove the scale below it is no calibration."""
UNSCALED_MAX = 1.0
"""A scale below 1 shrinks the gradients before the fp16 cast: the unscaled gradients
themselves overflow. A start may calibrate that low (fairseq's init scale), so only after
``TRAINED_BEFORE`` progress reports: there two falling skips are divergence however short
the run."""
TRAINED_BEFORE = 2
"""Progress reports before a run that say the scaler had left its start's calibration."""
RECOVERY_REPORTS = 10
"""Progress reports after the run's last skip that say training went on without overflowing."""
CONFIDENCE = 0.5
DEEP_CONFIDENCE = 0.6


def _drop(run: ScalerRun) -> float:
    if run.start_scale is None or run.last_scale is None or run.last_scale <= 0:
        return 1.0
    return run.start_scale / run.last_scale


def _diverged(run: ScalerRun) -> bool:
    if run.reports_after > RECOVERY_REPORTS:
        return False
    deep = run.last_scale is not None and run.last_scale < CALIBRATED_MIN
    if run.first_of_file and not deep:
        return False  # a start calibrating its scale (or an excerpt of one)
    below_unscaled = run.last_scale is not None and run.last_scale < UNSCALED_MAX
    after_training = run.reports_before >= TRAINED_BEFORE
    return (
        (run.skips >= RUN_MIN and run.falling)
        or (run.skips >= 2 and _drop(run) >= DROP_MIN)
        or (run.skips >= 2 and run.falling and below_unscaled and after_training)
    )


def _scale(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


OVERFLOW_SKIP = "nan.loss_scale_overflow"
"""The catalogue's context line for a skipped step: the evidence a scaler's run is shown by."""


def scaler_diverged(timelines: Sequence[Timeline], events: Sequence[Event]) -> PhaseFinding | None:
    """A loss scaler that kept overflowing, shown by its last skip line among ``events``."""
    finding = _diverged_run(timelines)
    if finding is None:
        return None
    skips = [e for e in events if e.signature == OVERFLOW_SKIP]
    return replace(finding, evidence=skips[-1]) if skips else finding


def _diverged_run(timelines: Sequence[Timeline]) -> PhaseFinding | None:
    for tl in timelines:
        run = tl.scaler_run
        if run is None or not _diverged(run):
            continue
        deep = run.last_scale is not None and run.last_scale < CALIBRATED_MIN
        where = f"{tl.source}:" if tl.source else "lines "
        return PhaseFinding(
            Category.APPLICATION,
            Kind.CRASH,
            DEEP_CONFIDENCE if deep else CONFIDENCE,
            f"{run.skips} overflow skip(s) in a row ({run.form}, {where}{run.first_line}-"
            f"{run.last_line}), loss scale {_scale(run.start_scale)} -> "
            f"{_scale(run.last_scale)} with no increase between them and "
            f"{run.reports_after} progress report(s) after: the fp16 gradients overflow "
            "step after step, the run diverged (learning rate, data, precision)",
        )
    return None
