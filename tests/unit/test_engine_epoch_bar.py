"""A per-epoch bar (Lightning's) read at its global step across resumes: the parser keeps the
bar's count, epoch and batches per epoch; ``EpochBarClock`` places them by the checkpoint the
attempt resumed from; the engine hands the placed step to the store, the detector and so the
policy's "same failure at the same iteration"."""

from __future__ import annotations

import dataclasses

from test_policy_decide import APP_ERROR, NODES, ctx

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.engine.engine import Engine
from trainmedic.core.engine.epoch_bar import EpochBarClock
from trainmedic.core.logparse.progress import parse_progress
from trainmedic.core.model import Action, Category
from trainmedic.core.observations import CheckpointSaved, JobStatus, Progress
from trainmedic.core.policy import AttemptRecord, decide
from trainmedic.core.states import JobState


def _bar(text: str) -> Progress:
    line = parse_progress(text)
    assert line is not None, text
    return Progress(
        0.0,
        "j",
        line.iteration,
        0,
        epoch_step=line.epoch_step,
        epoch=line.epoch,
        epoch_len=line.epoch_len,
    )


def _epoch(epoch: int, count: int, per_epoch: int) -> str:
    return f"Epoch {epoch}:  12%|█▏  | {count}/{per_epoch} [00:03<00:20,  9.1it/s, v_num=0]"


def _resumed(count: int) -> str:
    return f"Training: |          | {count}/? [00:00<00:00, 302.95it/s, v_num=1, train_loss=5.7]"


def test_the_parser_keeps_a_bars_epoch_fields_and_reads_only_lightnings_unknown_total_bar() -> None:
    labelled = parse_progress(_epoch(7, 46, 200))
    assert labelled is not None and labelled.iteration == 7 * 200 + 46
    assert (labelled.epoch_step, labelled.epoch, labelled.epoch_len) == (46, 7, 200)
    resumed = parse_progress("\r" + _resumed(0)[:-1] + "]\r" + _resumed(101))
    assert resumed is not None and (resumed.iteration, resumed.epoch_step) == (101, 101)
    assert resumed.epoch is None and resumed.epoch_len is None and resumed.step_time is not None
    assert parse_progress("Training: |          | 0/? [00:00<?, ?it/s]") is None  # first draw
    # Another bar of unknown total counts anything (a dataset's rows): no step.
    assert parse_progress("Map: |          | 1000/? [00:01<00:00, 900.0 examples/s]") is None
    plain = parse_progress(" 12%|█▏        | 120/1000 [01:00<07:20,  2.00it/s]")
    assert plain is not None and plain.epoch_step is None  # HF's bar counts global steps


def test_mid_epoch_resume_counts_from_the_resumed_epochs_start() -> None:
    clock = EpochBarClock()
    assert clock.step(_bar(_epoch(0, 50, 300))) == 50  # batches per epoch: 300
    clock.checkpoint(1000)  # epoch 3, batch 100
    clock.new_attempt()
    assert clock.step(_bar(_resumed(101))) == 1001
    assert clock.step(_bar(_resumed(300))) == 1200
    assert clock.step(_bar(_epoch(4, 1, 300))) == 1201  # the next epoch's bar is right


def test_a_label_that_lags_an_epoch_after_a_last_batch_resume_is_moved_for_the_attempt() -> None:
    clock = EpochBarClock()
    clock.step(_bar(_epoch(10, 199, 200)))
    clock.checkpoint(2200)  # the last batch of epoch 10
    clock.new_attempt()
    assert clock.step(_bar(_epoch(10, 1, 200))) == 2201
    assert clock.step(_bar(_epoch(10, 200, 200))) == 2400
    assert clock.step(_bar(_epoch(11, 1, 200))) == 2401
    # The next attempt resumes where its bar is right again: no lag carried over.
    clock.checkpoint(2500)
    clock.new_attempt()
    assert clock.step(_bar(_epoch(12, 101, 200))) == 2501


def test_restored_batches_run_again_after_a_last_batch_resume_are_steps() -> None:
    """Seen on the lab cluster (the workload's trace of every step beside the bar): resumed
    from the checkpoint of epoch 12's last batch (step 2600), the bar draws ``Training:
    198/?``, ``199/?``, ``200/?`` at steps 2601-2603 (Lightning runs those batches again,
    each a new step), then ``Epoch 12: n/200`` from step 2604; the attempt fails at step 2650,
    its last draw ``Epoch 12: 46/200`` being step 2649."""
    clock = EpochBarClock()
    clock.step(_bar(_epoch(12, 150, 200)))
    clock.checkpoint(2600)
    clock.new_attempt()
    assert [clock.step(_bar(_resumed(n))) for n in (198, 198, 199, 200)] == [
        2601,
        2601,  # drawn again with its loss: the same step
        2602,
        2603,
    ]
    assert clock.step(_bar(_epoch(12, 1, 200))) == 2604
    assert clock.step(_bar(_epoch(12, 46, 200))) == 2649
    assert clock.step(_bar(_epoch(12, 200, 200))) == 2803
    assert clock.step(_bar(_epoch(13, 1, 200))) == 2804  # the moved epochs stay moved


def _lab_attempt(clock: EpochBarClock, resumed: int, bars: list[str]) -> int:
    clock.checkpoint(resumed)
    clock.new_attempt()
    return max(clock.step(_bar(text)) for text in bars)


def test_two_attempts_that_ran_again_different_numbers_of_restored_batches_meet_at_one_step() -> (
    None
):
    """The lab's attempts 4 and 5 of the Lightning job (trace: both stepped last at 2649 and
    failed at 2650): attempt 4 resumed from 2200 and drew ``Training: 199/?``, ``200/?``,
    then epochs labelled 10, 11 and 12 (to ``47/200``); attempt 5 resumed from 2600 and drew
    ``Training: 198/?`` .. ``200/?``, then ``Epoch 12`` to ``46/200``. Both are step 2649."""
    clock = EpochBarClock()
    clock.step(_bar(_epoch(0, 1, 200)))
    four = [_resumed(199), _resumed(200)]
    four += [_epoch(e, n, 200) for e in (10, 11) for n in range(1, 201)]
    four += [_epoch(12, n, 200) for n in range(1, 48)]
    assert _lab_attempt(clock, 2200, four) == 2649
    five = [_resumed(n) for n in (198, 199, 200)] + [_epoch(12, n, 200) for n in range(1, 47)]
    assert _lab_attempt(clock, 2600, five) == 2649
    # Attempt 1 of that job, resumed from 1600: a whole epoch drawn as "Training: 1/?" ..
    # "200/?" (steps 1601-1800), then "Epoch 8: 1/200" at step 1801.
    one = [_resumed(n) for n in range(1, 201)] + [_epoch(8, 1, 200)]
    assert _lab_attempt(EpochBarClock(), 1600, one) == 1801


def test_a_right_bar_and_other_formats_are_left_as_they_are() -> None:
    clock = EpochBarClock()
    clock.checkpoint(60)
    clock.new_attempt()  # resumed at an epoch's start: "Epoch 3: 1/20" is step 61
    assert clock.step(_bar(_epoch(3, 1, 20))) == 61
    assert clock.step(_bar(_epoch(3, 1, 20))) == 61  # drawn again (its postfix changed)
    assert clock.step(Progress(0.0, "j", 64, 0)) == 64  # a step line: the number it prints


def test_without_a_checkpoint_or_an_epoch_length_the_count_is_placed_as_well_as_it_can() -> None:
    unknown = EpochBarClock()
    assert unknown.step(_bar(_resumed(21))) == 21  # nothing to place it by
    anchored = EpochBarClock()  # a service restarted mid-job: no bar of an epoch seen yet
    anchored.checkpoint(500)
    anchored.new_attempt()
    assert [anchored.step(_bar(_resumed(n))) for n in (41, 42, 50)] == [501, 502, 510]


def test_a_checkpoint_seen_after_the_attempt_began_and_before_its_first_step_is_its_resume() -> (
    None
):
    clock = EpochBarClock()
    clock.step(_bar(_epoch(0, 5, 40)))
    clock.new_attempt()
    clock.checkpoint(50)  # the watcher saw the last save a poll late
    assert clock.resumed_from == 50
    assert clock.step(_bar(_resumed(11))) == 51
    clock.checkpoint(60)  # saved by this attempt: not where it resumed
    assert clock.resumed_from == 50


def _attempt(engine: Engine, number: int, t: float, bars: list[str]) -> int | None:
    engine.observe(JobStatus(t, "j", JobState.RUNNING, NODES, number), t)
    for i, text in enumerate(bars):
        at = t + 1 + i * 0.1
        engine.observe(dataclasses.replace(_bar(text), time=at), at)
    _, last = engine.progress_of("j")
    assert engine.detector("j").iteration == (last.iteration if last else None)
    return last.iteration if last else None


def test_the_same_error_at_the_same_step_of_two_differently_drawn_attempts_is_stopped() -> None:
    """Attempt 0 fails at step 35 drawn as "Epoch 1: 15/20"; attempt 1 resumed from the
    checkpoint at 30 draws the same step as "Training: 15/?": one iteration, so the guessed
    application error is stopped after its confirmation retry. A transient error repeating
    its wording at step 33 is another iteration, and is restarted."""
    engine = Engine(SMALL_JOB, settle_s=0.5)
    engine.watch("j")
    first = _attempt(engine, 0, 0.0, [_epoch(e, n, 20) for e in (0, 1) for n in range(1, 21)][:35])
    engine.observe(CheckpointSaved(5.0, "j", 30), 5.0)
    assert first == 35
    same = _attempt(engine, 1, 10.0, [_resumed(n) for n in range(11, 16)])
    assert same == 35
    guess = dataclasses.replace(APP_ERROR, confidence=0.45)
    earlier = (AttemptRecord(0, Category.APPLICATION, "python.key_error", first, NODES, True),)
    assert decide(guess, ctx(attempts=earlier, iteration=same)).action is Action.STOP
    other = _attempt(engine, 2, 20.0, [_resumed(n) for n in range(11, 14)])
    assert other == 33
    assert decide(guess, ctx(attempts=earlier, iteration=other)).action is Action.RESTART


def test_an_attempts_last_steps_read_after_the_scheduler_says_it_failed_are_its_own() -> None:
    """srun holds a bar's redraws until a newline: on the lab cluster the last redraws before
    the crash reached the file as the attempt ended, after the scheduler reported it FAILED,
    and were dropped as "between attempts" (attempt 4 read at 1647, its retry at 1649, both
    failing at step 1650). While the scheduler shows the attempt that ran, they are its own;
    once it shows the next attempt (requeued, pending), a late line is no one's progress."""
    engine = Engine(SMALL_JOB, settle_s=0.5)
    engine.watch("j")
    _attempt(engine, 0, 0.0, [_epoch(0, n, 20) for n in range(1, 16)])
    engine.observe(JobStatus(5.0, "j", JobState.FAILED, NODES, 0), 5.0)
    for n in (16, 17):
        engine.observe(dataclasses.replace(_bar(_epoch(0, n, 20)), time=5.5), 5.5)
    assert engine.detector("j").iteration == 17
    _, last = engine.progress_of("j")
    assert last is not None and last.iteration == 17
    engine.observe(JobStatus(6.0, "j", JobState.PENDING, (), 1), 6.0)
    engine.observe(dataclasses.replace(_bar(_epoch(0, 18, 20)), time=6.5), 6.5)
    assert engine.progress_of("j") == (None, None)  # the next attempt has not run yet


def test_the_killed_attempts_last_draw_read_with_the_retrys_first_is_not_the_retrys() -> None:
    """Seen on the lab cluster (attempts 4 and 5 of the Lightning job, both last stepping at
    2849 and failing at 2850): attempt 3 was SIGKILLed at step 2407 drawing ``Epoch 11:
    7/200`` (its label a lap behind); that draw was terminated only by attempt 4's first
    ``\\r`` and read with attempt 4's first chunk. Taken as attempt 4's, it set the lag before
    the ``Training`` segment could and attempt 4 was read at 2847."""
    clock = EpochBarClock()
    clock.step(_bar(_epoch(0, 1, 200)))
    clock.checkpoint(2200)
    clock.new_attempt()  # attempt 3, resumed from 2200
    three = [_resumed(199), _resumed(200)] + [_epoch(10, n, 200) for n in range(1, 201)]
    three += [_epoch(11, n, 200) for n in range(1, 8)]
    assert [clock.step(_bar(t)) for t in three][-1] == 2409
    clock.checkpoint(2400)
    clock.new_attempt()  # attempt 4, resumed from 2400
    late = _bar(_epoch(11, 7, 200))
    assert clock.stale(late) and clock.stale(late)  # drawn again with its loss
    four = [_resumed(199), _resumed(200)] + [_epoch(e, n, 200) for e in (11, 12) for n in (1, 200)]
    four += [_epoch(13, n, 200) for n in range(1, 48)]
    placed = []
    for text in four:
        bar = _bar(text)
        assert not clock.stale(bar), text
        placed.append(clock.step(bar))
    assert placed[:3] == [2401, 2402, 2403] and placed[-1] == 2849


def test_a_new_attempts_own_draws_are_never_stale() -> None:
    clock = EpochBarClock()
    for n in range(1, 60):
        clock.step(_bar(_epoch(9, n, 200)))
    clock.checkpoint(1800)
    clock.new_attempt()
    first = _bar(_epoch(9, 1, 200))  # resumed at an epoch's start: before the old bar's end
    assert not clock.stale(first)
    assert not clock.stale(_bar(_epoch(9, 80, 200)))  # past it, but the bar already started
    again = EpochBarClock()
    again.step(_bar(_epoch(9, 59, 200)))
    again.checkpoint(1900)
    again.new_attempt()
    assert [again.stale(_bar(_epoch(9, 59, 200))) for _ in range(4)] == [True, True, False, False]
    fresh = EpochBarClock()  # the first attempt has no previous bar
    assert not fresh.stale(_bar(_epoch(3, 5, 20)))
    fresh.new_attempt()  # nor an attempt whose predecessor drew no labelled bar
    assert not fresh.stale(_bar(_epoch(3, 5, 20)))


def test_the_engine_leaves_the_killed_attempts_late_draw_out_of_the_retry() -> None:
    engine = Engine(SMALL_JOB, settle_s=0.5)
    engine.watch("j")
    _attempt(engine, 0, 0.0, [_epoch(0, n, 200) for n in range(1, 60)])
    engine.observe(CheckpointSaved(9.0, "j", 2400), 9.0)
    late = [_epoch(0, 59, 200), _epoch(0, 59, 200)]  # attempt 0's last draw, read late
    retry = late + [_resumed(199), _resumed(200)] + [_epoch(0, n, 200) for n in range(1, 48)]
    assert _attempt(engine, 1, 10.0, retry) == 2449
    first, _ = engine.progress_of("j")
    assert first is not None and first.iteration == 2401  # not the late draw's
