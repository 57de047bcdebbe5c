"""Train one cell of a sweep and measure it on the fixed held-out set.

The training is the pretrain stage's: `PretrainModule` (plain model + objective + AdamW with the optim
group's fixed linear warmup, the cell's peak rate and a cosine that ends at the cell's last step) on `PretrainDataModule`, under Lightning with
the `trainer` group's accelerator, devices, strategy and precision. What differs: no validation
during training (a cell is measured once, at its end, as Chinchilla's fits use final losses), and
the measurement is the per-token loss on a fixed held-out set, the first `eval_tokens` of the
validation split visited in order, the same for every cell of every sweep on that data.

A cell writes into its own folder of the store, `<store>/<key>/`: last.ckpt every
`checkpoint_every` steps while it trains (a killed cell continues from it: the checkpoint restores
step, optimizer, schedule, data position and RNG, so the result equals an uninterrupted run's), then
result.json, written atomically, after which the checkpoint is deleted. The key addresses the cell's
whole configuration, data and code, so a checkpoint found there always belongs to the same cell.
result.json holds only what the cell's inputs decide; its clock (tokens per second, seconds, whether
it resumed) is timing.json beside it (`lmforge.timings`), which the sweep's table never reads.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, NamedTuple

import lightning as L
import torch

from lmforge.io import write_json
from lmforge.objectives.summary import SplitSums, summarise
from lmforge.scaling.config import ScalingConfig
from lmforge.scaling.grid import Cell
from lmforge.timings import read_clock_file, write_clock_file
from lmforge.tokenizer.specials import SpecialTokens
from lmforge.training.callbacks import CurveWriter, RandomState
from lmforge.training.checkpoints import Checkpoints, check_weights, read_checkpoint
from lmforge.training.config import ObjectiveConfig, OptimConfig, TrainConfig, TrainerConfig
from lmforge.training.datamodule import PretrainDataModule
from lmforge.training.module import PretrainModule
from lmforge.training.pretrain import RESUME_STATE
from lmforge.training.trainer import build_trainer

TIMING = "timing.json"  # a cell's clock, beside its result.json

# the `trainer` keys each cell decides: its steps are its token budget at one batch a step
LOOP = {
    "trainer.max_steps": "the cell's token budget (scaling.grid)",
    "trainer.accumulate_grad_batches": "scaling.batch_size (one batch a step)",
}


class Setting(NamedTuple):
    """What every cell of a sweep shares."""

    scaling: ScalingConfig
    objective: ObjectiveConfig
    optim: OptimConfig
    trainer: TrainerConfig
    specials: SpecialTokens
    vocab_size: int
    encoded_dir: Path
    seed: int


def datamodule(setting: Setting, out_dir: Path, seed: int | None = None) -> PretrainDataModule:
    s = setting.scaling
    train = TrainConfig(
        batch_size=s.batch_size,
        seq_len=s.seq_len,
        out_dir=str(out_dir),
        reports_dir=str(out_dir),
        checkpoint_every=s.checkpoint_every,
    )
    return PretrainDataModule(
        str(setting.encoded_dir),
        setting.objective,
        train,
        setting.specials,
        setting.vocab_size,
        setting.seed if seed is None else seed,
    )


def train(
    cell: Cell, setting: Setting, folder: Path, run_id: str | None, uri: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train `cell` (continuing `folder/last.ckpt` if a killed run left one): its result row, which
    its inputs decide, and its timing (`save_result` keeps both, apart)."""
    started = time.perf_counter()
    L.seed_everything(cell.seed, workers=True, verbose=False)
    data = datamodule(setting, folder, cell.seed)
    optim = dataclasses.replace(setting.optim, lr=cell.lr)
    module = PretrainModule(cell.model, setting.objective, optim, cell.steps)
    last = folder / "last.ckpt"
    checkpoint = last if last.is_file() else None
    if checkpoint is not None:
        check_weights(module, read_checkpoint(checkpoint, needs=RESUME_STATE), checkpoint)
    curves = CurveWriter(
        str(folder), every_n_steps=max(1, setting.trainer.log_every_n_steps), timings=folder / TIMING
    )
    trainer = build_trainer(
        setting.trainer,
        mlflow_run=(run_id, uri) if run_id is not None and uri is not None else None,
        callbacks=[
            curves,
            RandomState(),
            Checkpoints(folder, every_n_steps=setting.scaling.checkpoint_every),
        ],
        accumulate_grad_batches=1,  # a cell's batch is scaling.batch_size, its token budget exact
        max_steps=cell.steps,
        limit_val_batches=0,  # measured once, at the end, on the fixed held-out set
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(folder),
        use_distributed_sampler=False,
    )
    trainer.fit(module, datamodule=data, ckpt_path=str(checkpoint) if checkpoint else None, weights_only=True)
    measured = evaluate(module, data, setting.scaling)
    return {
        **cell.describe(),
        "val_loss": measured["loss"],
        "val_accuracy": measured["accuracy"],
        "eval_tokens": int(measured["n_tokens"]),
        "train_tokens_seen": curves.tokens,
    }, {
        **{k: curves.clock()[k] for k in ("tokens_per_second", "wall_seconds", "whole_run")},
        "session_seconds": time.perf_counter() - started,
        "resumed": checkpoint is not None,
    }


@torch.no_grad()
def evaluate(module: PretrainModule, data: PretrainDataModule, cfg: ScalingConfig) -> dict[str, float]:
    """Per-token loss of `module` on the first `eval_tokens` tokens of the validation split."""
    dataset = data.dataset("val")
    n = min(len(dataset), max(1, cfg.eval_tokens // cfg.seq_len))
    device = next(module.parameters()).device
    was_training = module.training
    module.eval()
    sums = SplitSums()
    for start in range(0, n, cfg.eval_batch_size):
        batch = data.collate([dataset[i] for i in range(start, min(n, start + cfg.eval_batch_size))])
        _, stats = module({k: v.to(device) for k, v in batch.items()})
        sums.update(stats)
    module.train(was_training)
    return summarise(sums.as_dict())


def read_timing(folder: Path) -> dict[str, Any]:
    """A cell's clock: {} for a cell whose timing is lost (a clock is never a reason to retrain)."""
    return read_clock_file(folder / TIMING)


def save_result(folder: Path, result: dict[str, Any], timing: dict[str, Any]) -> None:
    write_clock_file(folder / TIMING, timing)
    write_json(folder / "result.json", result)
    for name in ("last.ckpt", "train_loss.csv", "val_loss.csv"):
        (folder / name).unlink(missing_ok=True)
