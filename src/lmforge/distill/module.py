"""The LightningModule of distillation: a `PretrainModule` of the student whose training loss is
`Distillation` (the pretraining objective plus the frozen teacher's terms).

It has the PretrainModule's hyperparameters and weights and nothing else (the teacher is held
outside the module tree), so its checkpoints are pretrain checkpoints: `load_module`, evaluation and
fine-tuning read a student as they read any pretrained model. Validation runs the pretraining
objective alone, so `val/loss` (which picks best.ckpt) is on the teacher's scale.
"""

from __future__ import annotations

import torch
from torch import nn

from lmforge.distill.config import DistillConfig
from lmforge.distill.objective import Distillation
from lmforge.training.module import PretrainModule


class DistillModule(PretrainModule):
    logged_stats = (*PretrainModule.logged_stats, "task_loss", "distill_kl", "distill_cos")

    def distil_from(self, teacher: nn.Module, cfg: DistillConfig) -> DistillModule:
        """Train on `teacher`'s soft targets with `cfg`'s temperature and weights (in place; returns self)."""
        distillation = Distillation(
            self.objective, teacher, cfg.temperature, cfg.alpha_ce, cfg.alpha_task, cfg.alpha_cos
        )
        # Not a submodule: its task objective is already `self.objective`, and registering it again
        # would put the NSP head in the checkpoint twice, under a name PretrainModule does not have.
        self.__dict__["distillation"] = distillation
        return self

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if self.training and "distillation" in self.__dict__:
            return self.__dict__["distillation"](self.model, batch)
        return super().forward(batch)  # validation and test: the pretraining objective alone
