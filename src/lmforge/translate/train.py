"""The `translate_train` stage: the 2017 encoder-decoder trained on the parallel pairs.

The recipe of Vaswani et al. (2017), as configuration: the `model` group (transformer_tiny: Post-LN,
sinusoidal positions, embeddings scaled by sqrt(d_model) and one matrix for encoder input, decoder
input and output projection), the `optim` group (Adam 0.9/0.98/1e-9 with the Noam schedule), label
smoothing and token-count batches from `translate`. The network and its training step are the
pretrain stage's (`PretrainModule` with the `seq2seq` objective's token cross entropy), so validation loss,
curves and checkpoints mean the same as there.

`translate.warmup=false` replaces the Noam schedule by a constant rate equal to its peak,
lr * d_model^-0.5 * warmup^-0.5 (the warmup experiment). `translate.average_last=k` averages the
weights of the last k snapshots taken every `checkpoint_every` steps (the paper averages 5).

Outputs: {out_dir}/model.ckpt (the final or averaged weights + hyperparameters, what evaluation
reads), with `translate.keep_every` also {out_dir}/model_step{N}.ckpt; {reports_dir}/{train_loss,val_loss}.csv and
metrics.json. A run starts afresh each time (an interrupted run is rerun whole).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from pathlib import Path

import lightning as L
import torch

from lmforge.errors import ConfigError
from lmforge.io import write_json
from lmforge.model import count_parameters
from lmforge.model.config import Family, ModelConfig, model_config
from lmforge.stage import DataInput, Plan, StageResult, TrainedModel, read, run_name_value, seed_value
from lmforge.timings import timings_path
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.tracking import active_run
from lmforge.training.callbacks import CurveWriter
from lmforge.training.checkpoints import save_file
from lmforge.training.config import (
    ObjectiveConfig,
    ObjectiveKind,
    OptimConfig,
    TrainerConfig,
    optim_config,
    trainer_config,
)
from lmforge.training.module import PretrainModule
from lmforge.training.trainer import build_trainer
from lmforge.translate.batches import encode_pairs, loader
from lmforge.translate.config import (
    PairsConfig,
    TranslateConfig,
    pairs_config,
    tokenizer_file,
    translate_config,
)
from lmforge.translate.pairs import read_split


def noam_peak(optim: OptimConfig, d_model: int) -> float:
    """The Noam schedule's highest rate, reached at step `warmup_steps`."""
    return optim.lr * d_model**-0.5 * optim.warmup_steps**-0.5


def schedule(optim: OptimConfig, translate: TranslateConfig, d_model: int) -> OptimConfig:
    """The configured optimiser, or without warmup a constant rate at the Noam peak."""
    if optim.schedule != "noam":
        raise ConfigError(
            f"optim.schedule: got {optim.schedule!r}, expected noam (optim=noam) for translation"
        )
    if translate.warmup:
        return optim
    return dataclasses.replace(optim, lr=noam_peak(optim, d_model), schedule="constant", warmup_steps=0)


def model_for(model: ModelConfig, vocab_size: int, pad: int) -> ModelConfig:
    config = dataclasses.replace(model, vocab_size=vocab_size, pad_token_id=pad)
    if config.family is not Family.encoder_decoder:
        raise ConfigError(
            f"model.family: got {config.family.value}, expected encoder_decoder for translation"
        )
    return config


class LastWeights(L.Callback):
    """Copies of the weights every `every` steps and at the end; the last `k` are averaged. With
    `keep_every`, each multiple of it short of the last step also hands the average of the snapshots
    so far (up to `k`) to `keep(state, steps)`: the model a run stopped there would have written,
    given the same validation schedule (each validation draws from the global random stream, so the
    dropout after it depends on when validations run)."""

    def __init__(
        self,
        k: int,
        every: int,
        keep_every: int | None = None,
        keep: Callable[[dict[str, torch.Tensor], list[int]], None] | None = None,
    ) -> None:
        self.k, self.every, self.keep_every, self.keep = k, every, keep_every, keep
        self.snapshots: deque[tuple[int, dict[str, torch.Tensor]]] = deque(maxlen=k)

    def _take(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        step = trainer.global_step
        if not self.snapshots or self.snapshots[-1][0] != step:
            self.snapshots.append((step, {k: v.detach().clone() for k, v in module.state_dict().items()}))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step % self.every == 0:
            self._take(trainer, module)
        if self.keep and self.keep_every and step % self.keep_every == 0 and step < trainer.max_steps:
            self.keep(*self.averaged())

    def on_train_end(self, trainer, module) -> None:
        self._take(trainer, module)

    def averaged(self) -> tuple[dict[str, torch.Tensor], list[int]]:
        steps = [step for step, _ in self.snapshots]
        states = [state for _, state in self.snapshots]
        average = {
            key: (sum(s[key].double() for s in states) / len(states)).to(states[0][key].dtype)
            if states[0][key].is_floating_point()
            else states[-1][key]
            for key in states[0]
        }
        return average, steps


def save_model(path: Path, module: PretrainModule, state: dict[str, torch.Tensor], steps: list[int]) -> None:
    save_file(path, {"state_dict": state, "hyper_parameters": dict(module.hparams), "averaged_steps": steps})


def kept_checkpoint(out_dir: str | Path, step: int) -> Path:
    """Where `translate.keep_every` writes the averaged weights of a step short of the last."""
    return Path(out_dir) / f"model_step{step}.ckpt"


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class TranslateTrainPlan(Plan):
    """The `translate_train` stage's plan."""

    pairs: PairsConfig = read(pairs_config)
    translate: TranslateConfig = read(translate_config)
    model: ModelConfig = read(model_config)
    optim: OptimConfig = read(optim_config)
    trainer: TrainerConfig = read(trainer_config)
    seed: int = read(seed_value)
    run_name: str = read(run_name_value)


def run(plan: TranslateTrainPlan) -> StageResult:
    pairs, translate, trainer_cfg, optim = plan.pairs, plan.translate, plan.trainer, plan.optim
    tokenizer = load_tokenizer(tokenizer_file(translate.tokenizer_dir))
    specials = special_token_ids(tokenizer)
    model = model_for(plan.model, tokenizer.get_vocab_size(), specials.pad)
    optim = schedule(optim, translate, model.d_model)
    if (
        translate.average_last > 1
        and translate.checkpoint_every * translate.average_last > trainer_cfg.max_steps
    ):
        raise ConfigError(
            f"translate.average_last={translate.average_last} snapshots every {translate.checkpoint_every} steps "
            f"span more than trainer.max_steps={trainer_cfg.max_steps}; expected fewer or closer snapshots"
        )
    splits = {}
    for split in ("train", "val"):
        splits[split] = encode_pairs(
            tokenizer,
            read_split(pairs.out_dir, split),
            specials.eos,
            model.max_seq_len,
            translate.long_pairs,
            split,
        )

    L.seed_everything(plan.seed, workers=True, verbose=False)
    objective = ObjectiveConfig(
        name="translation", kind=ObjectiveKind.seq2seq, label_smoothing=translate.label_smoothing
    )
    module = PretrainModule(model, objective, optim, trainer_cfg.max_steps)
    out_dir, reports = Path(translate.out_dir), Path(translate.reports_dir)
    curves = CurveWriter(
        str(reports), every_n_steps=trainer_cfg.log_every_n_steps, timings=timings_path(reports)
    )
    kept: list[int] = []

    def keep(state: dict[str, torch.Tensor], steps: list[int]) -> None:
        save_model(kept_checkpoint(out_dir, steps[-1]), module, state, steps)
        kept.append(steps[-1])

    last = LastWeights(translate.average_last, translate.checkpoint_every, translate.keep_every, keep)
    trainer = build_trainer(
        trainer_cfg,
        mlflow_run=active_run(),  # curves and the learning rate per step go to MLflow too
        log_lr=True,
        callbacks=[curves, last],
        default_root_dir=str(out_dir),
        enable_checkpointing=False,  # model.ckpt is written below, from the final or averaged weights
        use_distributed_sampler=False,  # TokenBatches makes the batches
    )
    bos = specials.eos  # <|endoftext|> starts the decoder and ends every sentence
    train_loader = loader(
        splits["train"].pairs, translate.max_tokens, specials.pad, bos, plan.seed, shuffle=True
    )
    val_loader = loader(
        splits["val"].pairs, translate.max_tokens, specials.pad, bos, plan.seed, shuffle=False
    )
    trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loader)

    state, steps = last.averaged()
    save_model(out_dir / "model.ckpt", module, state, steps)
    params = count_parameters(module.model)
    final_val = curves.val[-1]["val_loss"] if curves.val else float("nan")
    metrics = {
        "final_val_loss": final_val,
        "best_val_loss": min((row["val_loss"] for row in curves.val), default=float("nan")),
        "steps": trainer.global_step,
        "epochs": trainer.global_step / len(train_loader.batch_sampler),
        "tokens_seen": curves.tokens,
        "params_total": params["total"],
        "params_non_embedding": params["non_embedding"],
        "peak_lr": noam_peak(optim, model.d_model) if optim.schedule == "noam" else optim.lr,
        "averaged_checkpoints": len(steps),
        **({"kept_checkpoints": len(kept)} if translate.keep_every else {}),  # model_step{N}.ckpt
        "train_pairs_truncated": splits["train"].truncated,
        "val_pairs_truncated": splits["val"].truncated,
    }
    write_json(reports / "metrics.json", metrics)  # no clock (lmforge.timings): MLflow gets it below
    artifacts = [str(reports / name) for name in ("metrics.json", "train_loss.csv", "val_loss.csv")]
    inputs = {
        split: DataInput(
            pairs.out_dir, (str(Path(pairs.out_dir) / f"{split}.jsonl"),), len(splits[split].pairs)
        )
        for split in ("train", "val")
    }
    tokenizer_json = str(tokenizer_file(translate.tokenizer_dir))
    trained = TrainedModel(str(out_dir / "model.ckpt"), tokenizer_json, "encoder_decoder")  # it translates
    return StageResult(
        {**metrics, **curves.clock_metrics()},
        artifacts,
        params={"model": model.to_dict()},
        model=trained,
        inputs=inputs,
    )
