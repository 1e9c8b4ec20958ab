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


def test_a_resumed_bar_redrawing_the_restored_batches_is_no_step() -> None:
    """Seen on the lab cluster: resumed from the checkpoint of epoch 13's last batch (step
    2800, named ``epoch=12-step=2800.ckpt``), the bar redraws ``Training: 198/?`` ...
    ``200/?``, then counts the next epoch as ``Epoch 13: n/200``."""
    clock = EpochBarClock()
    clock.step(_bar(_epoch(12, 150, 200)))
    clock.checkpoint(2800)
    clock.new_attempt()
    assert [clock.step(_bar(_resumed(n))) for n in (198, 199, 200)] == [None, None, None]
    assert clock.step(_bar(_epoch(13, 1, 200))) == 2801
    assert clock.step(_bar(_epoch(13, 50, 200))) == 2850


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
