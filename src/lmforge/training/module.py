"""The LightningModule of pretraining: a plain model, an objective, AdamW and a warmup schedule.

It takes the validated configs (`ModelConfig`, `ObjectiveConfig`, `OptimConfig`) and builds the
network itself; it saves them as plain values (`save_hyperparameters`), so a checkpoint holds readable
plain data that loads with `torch.load(weights_only=True)`, and `from_hparams` builds the module again
from them (the checkpoint's door: they are parsed and checked there, as a config is at a stage's).
Training logs `train/loss` (what the optimizer minimises: MLM + NSP for BERT, label-smoothed if
configured) and `train/nll`, the unsmoothed per-token loss of the predicted targets, which is what
`val/loss` measures; NSP is logged apart (`train/nsp_loss`, `val/nsp_loss`). Validation adds up the
objective's sums over the whole split (`SplitSums`, reduced across processes), so `val/loss` is the
exact per-token loss of the split.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L
import torch

from lmforge.errors import ConfigError
from lmforge.model import build_model
from lmforge.model.config import ModelConfig, load_model_config
from lmforge.objectives.summary import SUM_KEYS, SplitSums, summarise
from lmforge.structured import plain
from lmforge.training.config import ObjectiveConfig, OptimConfig, objective_config, optim_config
from lmforge.training.objectives import OBJECTIVES
from lmforge.training.optim import hidden_matrices, optimization

HPARAMS = ("model", "objective", "optim", "max_steps")  # what a checkpoint's hyper_parameters hold


class PretrainModule(L.LightningModule):
    logged_stats = ("accuracy", "nsp_loss", "nsp_accuracy")  # logged as train/<name> when present

    def __init__(
        self,
        model: ModelConfig,
        objective: ObjectiveConfig,
        optim: OptimConfig,
        max_steps: int,
    ):
        super().__init__()
        plain_values = {"model": model.to_dict(), "objective": plain(objective), "optim": plain(optim)}
        self.save_hyperparameters({**plain_values, "max_steps": max_steps})
        self.model_config, self.objective_config, self.optim_config = model, objective, optim
        self.model = build_model(self.model_config)
        self.objective = OBJECTIVES[self.objective_config.kind].loss(self.objective_config, self.model_config)
        self.val_sums = SplitSums()

    @classmethod
    def from_hparams(cls, hparams: Mapping[str, Any]) -> PretrainModule:
        """The module a checkpoint's `hyper_parameters` describe; ConfigError when they describe none."""
        missing = [key for key in HPARAMS if key not in hparams]
        if missing:
            raise ConfigError(f"hyperparameters lack {', '.join(missing)}; expected {', '.join(HPARAMS)}")
        model, objective, optim = hparams["model"], hparams["objective"], hparams["optim"]
        return cls(
            load_model_config(model), objective_config(objective), optim_config(optim), hparams["max_steps"]
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.objective(self.model, batch)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, stats = self(batch)
        size = batch["input_ids"].shape[0]
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        self.log("train/nll", stats["nll_sum"] / stats["n_tokens"].clamp(min=1), batch_size=size)
        for name in self.logged_stats:
            if name in stats:
                self.log(f"train/{name}", stats[name], batch_size=size)
        return loss

    def on_validation_epoch_start(self) -> None:
        self.val_sums = SplitSums()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        _, stats = self(batch)
        self.val_sums.update(stats)

    def on_validation_epoch_end(self) -> None:
        totals = self.val_sums.totals.to(self.device)
        totals = self.trainer.strategy.reduce(totals, reduce_op="sum")  # whole split across processes
        summary = summarise(dict(zip(SUM_KEYS, totals.tolist())))
        self.log("val/loss", summary["loss"], prog_bar=True, sync_dist=False)
        for name in ("perplexity", "accuracy", "nsp_loss", "nsp_accuracy", "content_accuracy"):
            if name in summary:
                self.log(f"val/{name}", summary[name], sync_dist=False)

    def configure_optimizers(self):
        params = [*self.model.parameters(), *self.objective.parameters()]
        matrices = hidden_matrices(self.model)
        return optimization(
            params, self.optim_config, self.model_config.d_model, self.hparams.max_steps, matrices
        )
