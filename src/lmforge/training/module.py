"""The LightningModule of pretraining: a plain model, an objective, AdamW and a warmup schedule.

It takes plain config dicts (saved by `save_hyperparameters`, so a checkpoint holds readable plain
data that loads with `torch.load(weights_only=True)`) and builds the network itself.
Training logs `train/loss` (what the optimizer minimises: MLM + NSP for BERT, label-smoothed if
configured) and `train/nll`, the unsmoothed per-token loss of the predicted targets, which is what
`val/loss` measures; NSP is logged apart (`train/nsp_loss`, `val/nsp_loss`). Validation adds up the
objective's sums over the whole split (`SplitSums`, reduced across processes), so `val/loss` is the
exact per-token loss of the split.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch

from lmforge.model import build_model
from lmforge.model.config import load_model_config
from lmforge.objectives.summary import SUM_KEYS, SplitSums, summarise
from lmforge.training.config import objective_config, optim_config
from lmforge.training.objectives import OBJECTIVES
from lmforge.training.optim import optimization


class PretrainModule(L.LightningModule):
    logged_stats = ("accuracy", "nsp_loss", "nsp_accuracy")  # logged as train/<name> when present

    def __init__(
        self, model: dict[str, Any], objective: dict[str, Any], optim: dict[str, Any], max_steps: int
    ):
        super().__init__()
        self.save_hyperparameters()
        self.model_config = load_model_config(model)
        self.objective_config = objective_config(objective)
        self.optim_config = optim_config(optim)
        self.model = build_model(self.model_config)
        self.objective = OBJECTIVES[self.objective_config.kind].loss(self.objective_config, self.model_config)
        self.val_sums = SplitSums()

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
        return optimization(params, self.optim_config, self.model_config.d_model, self.hparams.max_steps)
