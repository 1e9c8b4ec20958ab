"""A PyTorch Lightning job with Lightning's defaults: its TQDM progress bar on stdout (rank 0,
updated in place with carriage returns), ``log_every_n_steps`` (50) for the logger, and a
``ModelCheckpoint`` every ``--ckpt-every`` steps; a restarted attempt resumes from
``last.ckpt`` (Lightning prints ``Restoring states from the checkpoint path at ...``).

Run under torchrun: Lightning reads the torchelastic environment (ranks, world size, master
address and port) and uses gloo on CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common


class TinyRegressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        time.sleep(common.step_sleep())
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Faults(Callback):
    """The test's fault hook, at the start of every training batch, plus the test trace."""

    def __init__(self) -> None:
        self.hook = common.FaultHook()
        self.started = False

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        if not self.started and trainer.global_rank == 0:
            common.trace("start", resumed_from=trainer.global_step)
        self.started = True
        self.hook.at_step(trainer.global_step + 1)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_rank == 0:
            common.trace("step", iter=trainer.global_step)

    def on_save_checkpoint(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_rank == 0:
            common.trace("checkpoint", iter=trainer.global_step)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt-dir", type=Path, required=True)
    parser.add_argument("--ckpt-every", type=int, default=100)
    parser.add_argument("--batches-per-epoch", type=int, default=200)
    parser.add_argument("--max-epochs", type=int, default=1000)
    parser.add_argument(
        "--progress-bar",
        choices=("default", "tqdm"),
        default="default",
        help="default: what Lightning picks (RichProgressBar when rich is installed, which "
        "prints nothing to a file until training ends); tqdm: TQDMProgressBar(), Lightning's "
        "default without rich",
    )
    args = parser.parse_args()
    L.seed_everything(0, verbose=False)
    x = torch.randn(args.batches_per_epoch * 8 * 4, 16)
    data = TensorDataset(x, x.sum(1, keepdim=True))
    timeout = timedelta(seconds=float(os.environ.get("WORKLOAD_COMM_TIMEOUT", "600")))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        num_nodes=int(os.environ.get("GROUP_WORLD_SIZE", "1")),
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timeout),
        max_epochs=args.max_epochs,
        callbacks=[
            *([TQDMProgressBar()] if args.progress_bar == "tqdm" else []),
            Faults(),
            ModelCheckpoint(
                dirpath=args.ckpt_dir, every_n_train_steps=args.ckpt_every, save_last=True
            ),
        ],
        default_root_dir=common.run_dir(),
        enable_model_summary=False,
    )
    last = args.ckpt_dir / "last.ckpt"
    trainer.fit(
        TinyRegressor(),
        DataLoader(data, batch_size=8),
        ckpt_path=str(last) if last.exists() else None,
    )
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)  # torch 2.13 + gloo: a clean exit sometimes aborts in teardown
