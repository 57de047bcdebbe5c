"""The LightningModule of pretraining: a plain model, an objective, AdamW and a warmup schedule.

It takes plain config dicts (saved by `save_hyperparameters`, so a checkpoint is readable and
`load_from_checkpoint` rebuilds everything) and builds the network itself.
Validation accumulates summed NLL and token counts, so `val/loss` is the exact per-token loss over
the split (and perplexity its exponential), synchronised across processes by torchmetrics.
"""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import torch
from torchmetrics import SumMetric

from lmforge.config import ModelConfig, load_model_config
from lmforge.model import build_model
from lmforge.objectives import CausalLMObjective, MaskedLMObjective, SpanCorruptionObjective
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, objective_config, optim_config
from lmforge.training.optim import build_optimizer
from lmforge.training.schedules import build_scheduler


def build_objective(objective: ObjectiveConfig, model: ModelConfig) -> torch.nn.Module:
    if objective.kind is ObjectiveKind.clm:
        return CausalLMObjective(objective.label_smoothing)
    if objective.kind is ObjectiveKind.mlm:
        return MaskedLMObjective(model.d_model, nsp=objective.nsp, label_smoothing=objective.label_smoothing)
    return SpanCorruptionObjective(objective.label_smoothing)


class PretrainModule(L.LightningModule):
    def __init__(
        self, model: dict[str, Any], objective: dict[str, Any], optim: dict[str, Any], max_steps: int
    ):
        super().__init__()
        self.save_hyperparameters()
        self.model_config = load_model_config(model)
        self.objective_config = objective_config(objective)
        self.optim_config = optim_config(optim)
        self.model = build_model(self.model_config)
        self.objective = build_objective(self.objective_config, self.model_config)
        self.val_nll = SumMetric()
        self.val_tokens = SumMetric()
        self.val_correct = SumMetric()

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.objective(self.model, batch)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, stats = self(batch)
        batch_size = batch["input_ids"].shape[0]
        self.log("train/loss", loss, prog_bar=True, batch_size=batch_size)
        for name in ("accuracy", "mlm_accuracy", "nsp_loss", "nsp_accuracy"):
            if name in stats:
                self.log(f"train/{name}", stats[name], batch_size=batch_size)
        return loss

    def on_train_epoch_start(self) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        dataset = datamodule.dataset("train") if datamodule is not None else None
        if hasattr(dataset, "set_epoch"):
            dataset.set_epoch(self.current_epoch)  # fresh NSP pairs each epoch

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        _, stats = self(batch)
        self.val_nll.update(stats["nll_sum"])
        self.val_tokens.update(stats["n_tokens"])
        self.val_correct.update(stats["n_correct"])

    def on_validation_epoch_end(self) -> None:
        n = self.val_tokens.compute().clamp(min=1)
        loss = self.val_nll.compute() / n
        self.log("val/loss", loss, prog_bar=True)  # already summed over processes
        self.log("val/perplexity", torch.exp(loss.clamp(max=50)))
        self.log("val/accuracy", self.val_correct.compute() / n)
        for metric in (self.val_nll, self.val_tokens, self.val_correct):
            metric.reset()

    def configure_optimizers(self):
        o = self.optim_config
        optimizer = build_optimizer(
            [*self.model.parameters(), *self.objective.parameters()], o.lr, o.weight_decay, o.betas, o.eps
        )
        extra: dict[str, Any] = {}
        if o.schedule == "noam":
            extra["d_model"] = self.model_config.d_model
        elif o.min_lr_ratio is not None:
            extra["min_lr_ratio"] = o.min_lr_ratio
        total = self.hparams.max_steps if o.schedule in ("linear", "cosine") else None
        scheduler = build_scheduler(optimizer, o.schedule, o.warmup_steps, total, **extra)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def perplexity(nll_sum: float, n_tokens: float) -> float:
    return math.exp(min(nll_sum / max(n_tokens, 1.0), 50.0))
