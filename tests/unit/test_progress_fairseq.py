"""fairseq's progress lines (``train_inner``, the epoch summary) read as steps at
``num_updates``; its validation and test lines, and prose naming ``num_updates``, are no step;
and a fairseq job whose updates stop is seen to hang, through the live path."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from live_job import LiveJob, stamp

from trainmedic.core.logparse.checkpoint import parse_checkpoint
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.progress import ProgressLine, parse_progress
from trainmedic.core.model import Kind
from trainmedic.offline.analyze import analyze_path

DATA = Path(__file__).resolve().parents[1] / "data"

TRAIN_INNER = (
    "2021-03-08 09:26:57 | INFO | train_inner | epoch 001:    100 / 1563 loss=9.872, "
    "nll_loss=9.012, ppl=516.4, wps=30506.8, ups=2.39, wpb=12765.4, bsz=412, num_updates=100, "
    "lr=1.25e-05, gnorm=2.61, loss_scale=128, train_wall=42, gb_free=10.1, wall=45"
)
EPOCH_SUMMARY = (
    "2020-03-23 11:38:13 | INFO | train | epoch 002 | loss 9.803 | nll_loss 8.89 | ppl 474.37 "
    "| wps 31194.9 | ups 0.07 | wpb 430468 | bsz 14485.4 | num_updates 695 | lr 0.00017375 "
    "| gnorm 55.005 | train_wall 1001 | wall 1234"
)
OLD_SUMMARY = (
    "| epoch 001 |  loss 5.211 | nll_loss 4.102 | ppl 34.35 | wps 9876 | ups 1.5 "
    "| num_updates 100 | lr 0.0005"
)
OLD_INNER = "| epoch 001:    100 / 1563 loss=5.211, nll_loss=4.102, wps=9876, num_updates=100"
HYDRA = (
    "[2023-05-01 10:00:00,123][fairseq.trainer][INFO] - epoch 001:     50 / 390 loss=3.2, "
    "nll_loss=2.1, ppl=4.29, wps=5000, ups=0.5, num_updates=50, lr=0.0001, gnorm=1.1"
)


# --log-format tqdm: the bar counts within the epoch, its postfix carries num_updates
# (the shape of fairseq issue #247's bars, with updates made).
TQDM_BAR = (
    "| epoch 002:  40%|####      | 200/500 [01:02<01:33,  3.21it/s, loss=9.104, nll_loss=8.2, "
    "ppl=294.1, wps=30506, ups=3.2, wpb=9392, bsz=87, num_updates=700, lr=1e-07, gnorm=1.4]"
)
# --log-format json (fairseq issue #2493's epoch summary; train_inner has unprefixed keys).
JSON_SUMMARY = (
    '2021-01-05 21:56:35 | INFO | train | {"epoch": 22, "train_loss": "788.127", '
    '"train_ntokens": "9392.23", "train_nsentences": "87.1935", "train_nll_loss": "7.317", '
    '"train_wps": "2919.9", "train_ups": "0.31", "train_wpb": "9392.2", "train_bsz": "87.2", '
    '"train_num_updates": "674", "train_lr": "2.61638e-05", "train_gnorm": "855.085", '
    '"train_loss_scale": "0.5", "train_train_wall": "99", "train_wall": "2548"}'
)
JSON_INNER = (
    '2021-01-05 21:52:10 | INFO | train_inner | {"epoch": 22, "update": 21.5, "loss": "790.4", '
    '"nll_loss": "7.4", "ups": "0.32", "num_updates": "660", "gnorm": "700.1"}'
)
JSON_VALID = (
    '2021-01-05 21:56:40 | INFO | valid | {"epoch": 22, "valid_loss": "801.2", '
    '"valid_nll_loss": "7.5", "valid_num_updates": "674"}'
)


def _parse(line: str) -> ProgressLine | None:
    return parse_progress(line[parse_prefix(line).body_start :])


@pytest.mark.parametrize(
    ("line", "iteration", "loss"),
    [
        (TRAIN_INNER, 100, 9.872),
        (EPOCH_SUMMARY, 695, 9.803),
        (OLD_SUMMARY, 100, 5.211),
        (OLD_INNER, 100, 5.211),
        (HYDRA, 50, 3.2),
        (TQDM_BAR, 700, 9.104),
        (JSON_SUMMARY, 674, 788.127),
        (JSON_INNER, 660, 790.4),
    ],
)
def test_each_wording_is_a_step_at_num_updates_with_its_loss(
    line: str, iteration: int, loss: float
) -> None:
    parsed = _parse(line)
    assert parsed is not None, line
    assert (parsed.iteration, parsed.loss) == (iteration, loss)
    assert parsed.samples_per_s is None  # wps counts tokens, not samples


def test_the_step_is_num_updates_not_the_count_within_the_epoch() -> None:
    later = TRAIN_INNER.replace("epoch 001:    100 / 1563", "epoch 003:      5 / 1563")
    parsed = _parse(later.replace("num_updates=100", "num_updates=3131"))
    assert parsed is not None and parsed.iteration == 3131
    assert parsed.step_time == pytest.approx(1 / 2.39) and parsed.grad_norm == 2.61


def test_the_real_fairseq_excerpt_counts_its_training_lines_only() -> None:
    lines = (DATA / "realworld" / "batch20" / "r20009.log").read_text().splitlines()
    steps = [(p.iteration, p.loss) for p in map(_parse, lines) if p is not None]
    assert steps == [(695, 9.803), (700, 9.44)]  # the epoch summary, then train_inner


@pytest.mark.parametrize(
    "line",
    [
        "2020-03-23 11:38:31 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 9.393 "
        "| nll_loss 8.328 | ppl 321.26 | wps 84912.1 | wpb 11298 | bsz 382.5 | num_updates 695 "
        "| best_loss 9.393",
        "| epoch 002 | valid on 'valid' subset | loss 9.393 | nll_loss 8.328 | num_updates 695",
        "2021-03-08 10:00:00 | INFO | valid_small | epoch 002 | loss 9.1 | num_updates 695",
        "2021-03-08 10:00:00 | INFO | test | epoch 002 | loss 9.1 | num_updates 695",
        "[2023-05-01 10:00:00,123][fairseq_cli.train][INFO] - epoch 001 | valid on 'valid' "
        "subset | loss 3.1 | num_updates 50",
        # prose of another tool naming num_updates: no fairseq step line
        "INFO trainer: will set num_updates 500 for the scheduler warmup",
        "we reached num_updates=500 in epoch 3",
        "2021-03-08 10:00:00 | INFO | fairseq.trainer | loaded checkpoint x.pt (epoch 3 "
        "| num_updates 700)",
        JSON_VALID,
        # a bar's postfix at 0 updates: no optimizer step made yet (fp16 warm-up, a first draw)
        TQDM_BAR.replace("num_updates=700", "num_updates=0"),
    ],
)
def test_validation_test_and_prose_lines_are_no_step(line: str) -> None:
    assert _parse(line) is None


def test_analyze_counts_fairseq_steps_and_not_the_validation_after_them(tmp_path: Path) -> None:
    # fp32 (no loss_scale field, which the loss scaler's tracker would read too)
    fp32 = TRAIN_INNER.replace(" loss_scale=128,", "")
    lines = [fp32.replace("num_updates=100", f"num_updates={n}") for n in range(100, 1100, 100)]
    lines += [
        "2021-03-08 09:30:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.0 "
        "| num_updates 1000 | best_loss 9.0"
    ] * 3
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    progress = analyze_path(tmp_path / "train.log").progress
    assert (progress.reports, progress.first_iteration, progress.last_iteration) == (10, 100, 1000)


def test_a_tqdm_bar_counts_updates_across_epochs_not_the_bar(tmp_path: Path) -> None:
    bars = [
        TQDM_BAR.replace("epoch 002", f"epoch {epoch:03d}")
        .replace("200/500", f"{count}/500")
        .replace("num_updates=700", f"num_updates={(epoch - 1) * 500 + count}")
        for epoch in (1, 2, 3)
        for count in (100, 300, 500)
    ]
    (tmp_path / "train.log").write_text("\n".join(bars) + "\n")
    progress = analyze_path(tmp_path / "train.log").progress
    assert (progress.first_iteration, progress.last_iteration) == (100, 1500)


@pytest.mark.parametrize(
    ("line", "updates"),
    [
        # fairseq's checkpoint_utils in its three spellings across versions
        (
            "2021-03-08 10:02:11 | INFO | fairseq.checkpoint_utils | saved checkpoint "
            "checkpoints/checkpoint3.pt (epoch 3 @ 1500 updates, score 3.2) (writing took "
            "2.1 seconds)",
            1500,
        ),
        ("Saved checkpoint /ckpt/checkpoint_2_700.pt (epoch 2 @ 700 updates, score None) "
         "(writing took 0.9 seconds)", 700),
        ("Save checkpoint /ckpt/checkpoint_last.pt (epoch 1 @ 42 updates, score 7.0) "
         "(writing took 0.1 seconds)", 42),
        # a path naming a step: the updates still count
        ("saved checkpoint /runs/step100/checkpoint1.pt (epoch 1 @ 250 updates, score 4.0) "
         "(writing took 1 seconds)", 250),
    ],
)  # fmt: skip
def test_fairseqs_checkpoint_line_names_its_updates(line: str, updates: int) -> None:
    assert parse_checkpoint(line[parse_prefix(line).body_start :]) == updates


_FRAGMENTS = st.sampled_from(
    [
        "| INFO | train_inner |", "| INFO | train |", "| valid |", "epoch 001:", "epoch 002 |",
        "   100 / 1563", "loss=", "loss ", "num_updates=", "num_updates ", "ups=", "gnorm ",
        "9.872,", "1e999", "nan", "-inf", "99999999999999999999", "valid on 'valid' subset",
        "|", " ", "=", ",", ":", "\r",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_FRAGMENTS | st.text(max_size=8), max_size=30))
def test_fairseq_like_lines_never_raise(parts: list[str]) -> None:
    parsed = parse_progress("".join(parts))
    assert parsed is None or 0 <= parsed.iteration < 10**18


def _inner(t: float, updates: int) -> str:
    return (
        f"{stamp(t)} | INFO | train_inner | epoch 001:    {updates} / 1563 loss=4.1, "
        f"nll_loss=3.2, ppl=9.2, wps=30506.8, ups=1.0, wpb=12765.4, bsz=412, "
        f"num_updates={updates}, lr=1e-04, gnorm=1.2, loss_scale=128, train_wall=4, wall=5\n"
    )


def test_a_fairseq_job_whose_updates_stop_hangs_live(tmp_path: Path) -> None:
    """Through the service's path (JobLogSource on a real file, the engine): the updates are
    progress, a validation printed after they stopped is none, so the job is seen to hang."""
    job = LiveJob(tmp_path / "train.log")
    job.train(lambda now, i: _inner(now, i * 10))
    engine, now = job.engine, job.now
    last_step = now
    job.write(
        f"{stamp(now + 1.0)} | INFO | valid | epoch 001 | valid on 'valid' subset | loss 4.0 "
        "| nll_loss 3.1 | num_updates 300 | best_loss 4.0\n",
        now + 1.0,
    )
    _, last = engine.progress_of("j")
    assert last is not None and (last.iteration, last.time) == (300, last_step)
    findings = engine.evaluate(last_step + 30.0) or engine.evaluate(last_step + 31.0)
    assert [f.verdict.kind for f in findings] == [Kind.HANG]
    assert findings[0].anomaly.iteration == 300
