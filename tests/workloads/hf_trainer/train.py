"""A Hugging Face ``Trainer`` job with its defaults: the tqdm bar on stderr (rank 0), the log
dict (``{'loss': '2.301', 'grad_norm': ..., 'learning_rate': ..., 'epoch': ...}``, no step)
on stdout every ``logging_steps``, checkpoints every ``save_steps``, and Python logging
(``asctime``: local time, no zone) for the script's and transformers' own messages. The job
runs in a non-UTC ``TZ`` (the test sets America/New_York).

No download: a tiny GPT-2 is built from a config in code (``HF_HUB_OFFLINE=1``), trained on
random tokens. A restarted attempt resumes from the newest ``checkpoint-N`` (the Trainer
prints ``Continuing training from checkpoint, will skip to saved global_step``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch
import transformers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers.trainer_utils import get_last_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

logger = logging.getLogger("train")


class RandomTokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self, size: int, length: int, vocab: int) -> None:
        gen = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (size, length), generator=gen)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Faults(TrainerCallback):
    """The test's fault hook at every step, its trace, and the job's step pace."""

    def __init__(self) -> None:
        self.hook = common.FaultHook()
        self.started = False

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not self.started and state.is_world_process_zero:
            common.trace("start", resumed_from=state.global_step)
        self.started = True
        self.hook.at_step(state.global_step + 1)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        time.sleep(common.step_sleep())
        if state.is_world_process_zero:
            common.trace("step", iter=state.global_step)

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.is_world_process_zero:
            common.trace("checkpoint", iter=state.global_step)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--logging-steps", type=int, default=20)
    parser.add_argument("--save-steps", type=int, default=100)
    args = parser.parse_args()
    # What the transformers example scripts do, with logging's default time format.
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        handlers=[logging.StreamHandler(sys.stdout)],
        level=logging.INFO,
    )
    transformers.utils.logging.set_verbosity_info()
    transformers.utils.logging.disable_default_handler()
    transformers.utils.logging.enable_propagation()
    rank = int(os.environ.get("RANK", "0"))
    if rank != 0:
        logging.getLogger().setLevel(logging.WARNING)
        transformers.utils.logging.set_verbosity_warning()
    logger.info("Training in time zone %s", time.strftime("%Z"))
    config = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=1, n_head=2, n_inner=64)
    training = TrainingArguments(
        output_dir=str(args.output_dir),
        max_steps=args.max_steps,
        per_device_train_batch_size=4,
        logging_steps=args.logging_steps,
        save_steps=args.save_steps,
        save_total_limit=2,
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo",
        ddp_timeout=int(float(os.environ.get("WORKLOAD_COMM_TIMEOUT", "600"))),
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=training,
        train_dataset=RandomTokens(4096, 32, config.vocab_size),
        callbacks=[Faults()],
    )
    last = get_last_checkpoint(str(args.output_dir)) if args.output_dir.is_dir() else None
    trainer.train(resume_from_checkpoint=last)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)  # torch 2.13 + gloo: a clean exit sometimes aborts in teardown
