"""Progress and checkpoint lines of the common trainers."""

from __future__ import annotations

import math

import pytest

from trainmedic.core.logparse.checkpoint import parse_checkpoint
from trainmedic.core.logparse.progress import is_finite_loss, parse_progress, parse_progress_json


def test_trainmedic_trainer_line() -> None:
    p = parse_progress(
        "node=node2 iter=120 loss=0.5321 step_s=0.0123 compute_s=0.0081 wait_s=0.0042 "
        "samples_per_s=2601.3"
    )
    assert p is not None
    assert (p.iteration, p.loss, p.step_time) == (120, 0.5321, 0.0123)
    assert (p.compute_time, p.wait_time, p.samples_per_s) == (0.0081, 0.0042, 2601.3)


def test_megatron_line() -> None:
    p = parse_progress(
        " iteration      300/  500000 | consumed samples:       153600 | elapsed time per "
        "iteration (ms): 2250.0 | learning rate: 3.0E-05 | lm loss: 6.125E+00 | loss scale: "
        "65536.0 | grad norm: 2.875 | number of skipped iterations:   0 |"
    )
    assert p is not None
    assert (p.iteration, p.loss, p.grad_norm) == (300, 6.125, 2.875)
    assert p.step_time == pytest.approx(2.25)


def test_tqdm_and_lightning_bars() -> None:
    hf = parse_progress(" 12%|█▏        | 120/1000 [01:00<07:20,  2.00it/s]")
    assert hf is not None and hf.iteration == 120 and hf.step_time == pytest.approx(0.5)
    assert hf.elapsed_s == 60
    pl = parse_progress(
        "Epoch 2:  45%|████▌     | 450/1000 [00:30<00:36, 15.0it/s, loss=0.25, v_num=1]"
    )
    # Lightning counts the epoch's batches: step 2 x 1000 + 450, as its checkpoints name it.
    assert pl is not None and (pl.iteration, pl.loss, pl.label) == (2450, 0.25, "Epoch 2")
    slow = parse_progress("Tokenizing:  10%|█         | 5/50 [20:00<3:00:00, 240.00s/it]")
    assert slow is not None and slow.step_time == 240.0 and slow.elapsed_s == 1200


def test_hf_dict_needs_a_step() -> None:
    assert parse_progress("{'loss': 2.31, 'learning_rate': 5e-05, 'epoch': 0.1}") is None
    p = parse_progress("{'loss': 1.5, 'grad_norm': nan, 'learning_rate': 1e-05, 'step': 40}")
    assert p is not None and p.iteration == 40 and not is_finite_loss(p)


def test_plain_forms() -> None:
    assert parse_progress("step 100 loss 2.3") == parse_progress("Step 100/1000 loss: 2.3")
    p = parse_progress("Iteration 7")
    assert p is not None and p.iteration == 7 and p.loss is None
    nan = parse_progress("iter 9 | loss nan")
    assert nan is not None and nan.loss is not None and math.isnan(nan.loss)


def test_non_progress_lines() -> None:
    for line in ("142.89722776412964 172.6102113723755", "NCCL INFO Bootstrap", ""):
        assert parse_progress(line) is None


def test_jsonl_protocol() -> None:
    p = parse_progress_json(
        '{"iteration": 12, "loss": 0.5, "step_time": 0.1, "rank": 3, "time": 17.5}'
    )
    assert p is not None and (p.iteration, p.rank, p.time, p.step_time) == (12, 3, 17.5, 0.1)
    for bad in ('{"iteration": "x"}', "not json", '{"iteration": true}', "[1]", '{"iteration": 1'):
        assert parse_progress_json(bad) is None


@pytest.mark.parametrize(
    ("line", "iteration"),
    [
        ("saved checkpoint at iteration 500", 500),
        (" successfully saved checkpoint at iteration    2000 to /ckpt/megatron", 2000),
        ("checkpoint saved iter=40 path=/tmp/run/ckpt-40.pt", 40),
        ("Saving model checkpoint to ./out/checkpoint-1500", 1500),
        (
            "Epoch 0, global step 100: 'val_loss' reached 0.5, "
            "saving model to '/c/epoch=0-step=100.ckpt'",
            100,
        ),
        ("[Torch] Checkpoint global_step300 is ready now!", 300),
        ("loading checkpoint from /ckpt", None),
        ("iteration 5 loss 2.0", None),
    ],
)
def test_checkpoint_lines(line: str, iteration: int | None) -> None:
    assert parse_checkpoint(line) == iteration


def test_a_slurm_step_id_is_not_training_progress() -> None:
    line = "slurmstepd: error: *** STEP 1.0 ON node1 CANCELLED AT 2026-11-29T09:00:00 ***"
    assert parse_progress(line) is None


@pytest.mark.parametrize(
    "line",
    [
        # resume / restore announcements
        "event=resume ckpt=/run/ckpt/model_iter000860.pt iter=860",
        "ts=2026-03-07T10:11:12.123Z rank=0 event=resume ckpt=/c/m.pt iter=860",
        "Resuming from checkpoint at step 860",
        "Restored all states from the checkpoint at iteration 860",
        " successfully loaded checkpoint from /ckpt/megatron at iteration 860",
        "Continuing training from global step 860",
        # config and argument echoes
        "Namespace(iter=1000, lr=0.1)",
        "args.iter = 1000",
        "  train_iters ..................................... 1000",
        "event=config train_iters=1000 iter=0",
        # checkpoints, schedulers, errors, evaluation
        "saved checkpoint at iteration 900",
        "event=ckpt iter=900 path=/run/ckpt/model_iter000900.pt",
        "lr scheduler step 860 lr=0.001",
        "slurmstepd: error: *** STEP 1.0 ON node1 CANCELLED AT 2026-11-29T09:00:00 ***",
        "[rank1]: RuntimeError: loss scaler state is inconsistent at iteration 880",
        "WARNING: skipping step 860 due to overflow",
        "evaluating at step 860",
    ],
)
def test_lines_naming_an_iteration_are_not_training_steps(line: str) -> None:
    assert parse_progress(line) is None


@pytest.mark.parametrize(
    ("line", "iteration"),
    [
        ("ts=2026-03-07T10:11:12.123Z rank=0 event=step iter=861 loss=0.23 dt_ms=12.4", 861),
        ("node=node2 iter=120 loss=0.53 step_s=0.012 ckpt_s=0.1 eval_loss=0.3", 120),
        ("Step 100/1000 loss: 2.3 lr_scheduler=cos data_loader_s=0.1", 100),
        # Megatron counts skipped iterations on every step line: still a step
        (" iteration   300/  500000 | lm loss: 6.1E+00 | number of skipped iterations:   0 |", 300),
    ],
)
def test_step_lines_with_words_used_as_keys_stay_steps(line: str, iteration: int) -> None:
    parsed = parse_progress(line)
    assert parsed is not None and parsed.iteration == iteration


def test_key_value_checkpoint_lines() -> None:
    assert parse_checkpoint("event=ckpt iter=900 path=/run/ckpt/model_iter000900.pt") == 900
    assert parse_checkpoint("type=checkpoint step=12") == 12
    assert parse_checkpoint("event=resume ckpt=/run/ckpt/model_iter000850.pt iter=850") is None


def test_a_bars_first_draw_is_no_step_and_an_epoch_bar_counts_global_steps() -> None:
    """A resumed HF Trainer draws 0/N before jumping to its step; Lightning's bar restarts at
    every epoch: taken as they are, a resumed attempt looked as if it never passed step 0
    and the job was stopped for 'attempts without a new checkpoint'."""
    assert parse_progress("  0%|          | 0/100000 [00:00<?, ?it/s]") is None
    resumed = parse_progress("  1%|          | 801/100000 [00:02<1:00:00, 9.1it/s]")
    assert resumed is not None and resumed.iteration == 801
    first = parse_progress("Epoch 7:   0%|          | 0/200 [00:00<?, ?it/s, v_num=0]")
    assert first is None
    later = parse_progress("Epoch 7:  23%|██▎       | 46/200 [00:04<00:15, 10.12it/s, v_num=0]")
    assert later is not None and later.iteration == 7 * 200 + 46
