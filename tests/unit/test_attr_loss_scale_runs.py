"""A dynamic loss scaler that keeps overflowing is a diverged run (application); a scaler that
probes upward now and then, or calibrates at the start, is healthy; a hardware crash after a
diverging run is still the hardware's."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from trainmedic.core.logparse.loss_scale import default_forms, read_report
from trainmedic.core.model import Category
from trainmedic.offline.analyze import analyze_path

REALWORLD = Path(__file__).parents[1] / "data" / "realworld"


def test_every_report_form_reads_its_examples_with_their_values() -> None:
    """The data (loss_scale.toml) and the parser agree: each example is read by its own form,
    with the values listed beside it."""
    for form in default_forms():
        assert form.examples, form.id
        for example, values in zip(form.examples, form.values, strict=True):
            report = read_report(example)
            assert report is not None and report.form == form.id, (form.id, example)
            got = {
                "scale": report.scale,
                "attempted": report.attempted,
                "iteration": report.iteration,
                "skipped": report.skipped,
            }
            want = dict(pair.split("=") for pair in values.split())
            for key, value in want.items():
                assert got[key] == float(value), (form.id, example, key)
            assert all(got[k] is None for k in got if k not in want), (form.id, example)


def _verdict(tmp_path: Path, text: str) -> tuple[bool, Category, float, str]:
    log = tmp_path / "train.log"
    log.write_text(text)
    v = analyze_path(log).verdict
    return v.failure, v.category, v.confidence, v.basis


def _deepspeed(scales: list[int], step0: int = 1000) -> str:
    lines = []
    for i, (a, b) in enumerate(itertools.pairwise(scales)):
        lines.append(f"steps: {step0 + i} loss: 2.0{i} iter time (s): 1.2 samples/sec: 40\n")
        lines.append(
            "[2024-03-12 03:10:11,412] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
            f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {a}, reducing to {b}\n"
        )
    return "".join(lines)


def _healthy_steps(first: int, count: int) -> str:
    return "".join(
        f"steps: {n} loss: 1.9 iter time (s): 1.2 samples/sec: 40\n"
        for n in range(first, first + count)
    )


DIVERGING = {
    # DeepSpeed's loss_scaler: trained fine (a probe, the scale grew back), then every step
    "deepspeed": _healthy_steps(1, 30)
    + _deepspeed([65536, 32768])
    + _healthy_steps(40, 30)
    + _deepspeed([65536, 32768, 16384, 8192, 4096, 2048, 1024, 512]),
    # DeepSpeed's fused optimizer (verbose): three lines for one skip
    "deepspeed_fused": _healthy_steps(1, 30)
    + "".join(
        f"[INFO] [fused_optimizer.py:347:_update_scale] Grad overflow on iteration {100 + i}\n"
        f"[INFO] [fused_optimizer.py:348:_update_scale] Reducing dynamic loss scale from "
        f"{2 ** (12 - i)} to {2 ** (11 - i)}.0\n"
        f"[INFO] [logging.py:96:log_dist] [Rank 0] Overflow detected. Skipping step. "
        f"Attempted loss scale: {2 ** (12 - i)}, reducing to {2 ** (11 - i)}.0\n"
        for i in range(8)
    ),
    # Apex AMP
    "apex": _healthy_steps(1, 30)
    + "".join(
        f"Epoch: [3][{200 + i}/5005]\tLoss 2.69e+00\n"
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to "
        f"{2.0 ** (14 - i)}\n"
        for i in range(9)
    ),
    # fairseq
    "fairseq": _healthy_steps(1, 30)
    + "".join(
        f"2024-02-29 07:58:5{i} | INFO | fairseq.trainer | NOTE: gradient overflow detected, "
        f"ignoring gradient, setting loss scale to: {2.0 ** (10 - i)}\n"
        for i in range(7)
    ),
    # Megatron: most iterations of each interval skipped, the scale falling
    "megatron": "".join(
        f" iteration {it:8d}/  500000 | lm loss: 2.1E+00 | loss scale: {scale} | grad norm: "
        f"1.0 | number of skipped iterations: {skipped:3d} | number of nan iterations:   0 |\n"
        for it, scale, skipped in [
            (1000, 65536.0, 0),
            (1010, 65536.0, 0),
            (1020, 512.0, 7),
            (1030, 2.0, 8),
            (1040, 0.5, 10),
        ]
    ),
}


@pytest.mark.parametrize("shape", sorted(DIVERGING))
def test_a_scaler_that_keeps_overflowing_is_a_diverged_run(tmp_path: Path, shape: str) -> None:
    failure, category, confidence, basis = _verdict(tmp_path, DIVERGING[shape])
    assert failure and category is Category.APPLICATION, (shape, basis)
    assert 0.45 <= confidence <= 0.6
    assert "overflow skip(s) in a row" in basis


HEALTHY = {
    # DeepSpeed probing: a skip every ~1000 steps, the scale growing back between them
    "deepspeed_probing": "".join(
        _healthy_steps(k * 50, 40) + _deepspeed([65536, 32768], k * 50 + 40) for k in range(6)
    ),
    # Apex probing: the same "reducing to" value each time (it grew back in between)
    "apex_probing": "".join(
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
        + _healthy_steps(k * 30, 25)
        for k in range(6)
    ),
    # a start calibrating down from 2^32, then training
    "deepspeed_calibration": _deepspeed([2**32 // 2**i for i in range(17)])
    + _healthy_steps(20, 30),
    # an excerpt of that start, ending in the calibration
    "calibration_excerpt": _deepspeed([2**32 // 2**i for i in range(8)]),
    # an instability that the scaler rode out: training went on after it
    "recovered": _healthy_steps(1, 30)
    + _deepspeed([65536, 32768, 16384, 8192, 4096, 2048, 1024])
    + _healthy_steps(40, 40),
    # Megatron with a skipped iteration now and then
    "megatron_rare": "".join(
        f" iteration {it:8d}/  500000 | lm loss: 2.1E+00 | loss scale: 65536.0 | grad norm: "
        f"1.0 | number of skipped iterations: {skipped:3d} | number of nan iterations:   0 |\n"
        for it, skipped in [(1000, 0), (1010, 1), (1020, 0), (1030, 1), (1040, 2)]
    ),
}


@pytest.mark.parametrize("shape", sorted(HEALTHY))
def test_a_scaler_probing_or_calibrating_is_no_failure(tmp_path: Path, shape: str) -> None:
    failure, _, _, basis = _verdict(tmp_path, HEALTHY[shape])
    assert not failure, (shape, basis)


def test_a_hardware_crash_after_a_diverging_run_is_the_hardware(tmp_path: Path) -> None:
    text = DIVERGING["deepspeed"] + (
        "[Thu Mar 12 03:12:01 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, GPU has fallen "
        "off the bus.\n"
    )
    failure, category, _, basis = _verdict(tmp_path, text)
    assert failure and category is Category.GPU_HARDWARE, basis


def test_r12005_deepspeed_scale_halved_on_every_step_is_the_application() -> None:
    v = analyze_path(REALWORLD / "batch12" / "r12005.log").verdict
    assert v.failure and v.category is Category.APPLICATION
    assert "64 -> 2" in v.basis
