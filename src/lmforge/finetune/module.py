"""The LightningModule of fine-tuning: a backbone from `build_model`, a task head, AdamW + schedule.

Like `PretrainModule` it takes the validated configs, saves them as plain values (`save_hyperparameters`,
so checkpoints load with `weights_only=True`; `from_hparams` builds the module again from them) and
builds the network itself; the stage puts the starting weights into
`backbone` (scratch, our pretraining checkpoint, or a Hugging Face folder) and applies LoRA or
freezing (`lmforge.finetune.adapt`) before training. Validation collects every example's prediction
and scores the whole split with the task's metrics; `val/<first metric>` selects checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L
import torch

from lmforge.errors import ConfigError
from lmforge.finetune.tasks import TASKS, HeadContext, metric_names, score
from lmforge.model import build_model
from lmforge.model.config import ModelConfig, load_model_config
from lmforge.structured import plain
from lmforge.tasks.config import TaskConfig, task_config
from lmforge.training.config import OptimConfig, optim_config
from lmforge.training.optim import hidden_matrices, optimization


class FinetuneModule(L.LightningModule):
    def __init__(
        self,
        model: ModelConfig,
        task: TaskConfig,
        optim: OptimConfig,
        max_steps: int,
        head_dropout: float = 0.1,
        label_ids: list[list[int]] | None = None,  # text-to-text: each label's token ids
        pad_id: int = 0,
    ):
        super().__init__()
        configs = {"model": model.to_dict(), "task": plain(task), "optim": plain(optim)}
        self.save_hyperparameters(
            {
                **configs,
                "max_steps": max_steps,
                "head_dropout": head_dropout,
                "label_ids": label_ids,
                "pad_id": pad_id,
            }
        )
        self.model_config, self.task = model, task
        heads = TASKS[self.task.kind].heads
        family = self.model_config.family
        if family not in heads:
            allowed = ", ".join(sorted(f.value for f in heads))
            raise ConfigError(
                f"model.family: got {family.value} for task {self.task.name} "
                f"({self.task.kind.value}), expected one of: {allowed}"
            )
        self.spec = heads[family]
        self.optim_config = optim
        self.backbone = build_model(self.model_config)
        self.head = self.spec.build(
            self.model_config, HeadContext(self.task, head_dropout, label_ids, pad_id)
        )
        self._predicted: list = []
        self._gold: list = []

    @classmethod
    def from_hparams(cls, hparams: Mapping[str, Any]) -> FinetuneModule:
        """The module a checkpoint's `hyper_parameters` describe; ConfigError when they describe none."""
        missing = [key for key in ("model", "task", "optim", "max_steps") if key not in hparams]
        if missing:
            raise ConfigError(
                f"hyperparameters lack {', '.join(missing)}; expected a fine-tuning checkpoint's"
            )
        rest = {k: hparams[k] for k in ("head_dropout", "label_ids", "pad_id") if k in hparams}
        model, task, optim = hparams["model"], hparams["task"], hparams["optim"]
        configs = (load_model_config(model), task_config(task), optim_config(optim))
        return cls(*configs, hparams["max_steps"], **rest)

    def forward(self, batch: dict[str, Any]) -> Any:
        return self.spec.forward(self.backbone, self.head, batch)

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss = self.spec.loss(self(batch), batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["input_ids"].shape[0])
        return loss

    def on_validation_epoch_start(self) -> None:
        self._predicted, self._gold = [], []

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        outputs, (predicted, gold) = self.collect(batch)
        if self.spec.has_loss(batch):
            self.log("val/loss", self.spec.loss(outputs, batch), batch_size=batch["input_ids"].shape[0])
        self._predicted += predicted
        self._gold += gold

    def collect(self, batch: dict[str, Any]) -> tuple[Any, tuple[list, list]]:
        """The head's outputs and the (predicted, gold) values of each example in `batch`."""
        outputs = self(batch)
        return outputs, self.spec.predictions(outputs, batch, self.task)

    def on_validation_epoch_end(self) -> None:
        for name, value in score(self.task, self._predicted, self._gold).items():
            self.log(f"val/{name}", value, prog_bar=True)

    @property
    def monitor(self) -> str:
        """The validation metric that selects checkpoints and stops training: the task's first."""
        return f"val/{metric_names(self.task)[0]}"

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        matrices = hidden_matrices(self)
        return optimization(
            params, self.optim_config, self.model_config.d_model, self.hparams.max_steps, matrices
        )


@torch.no_grad()
def evaluate(module: FinetuneModule, batches) -> dict[str, float]:
    """The task's metrics of `module` (in eval mode) over every example of `batches`."""
    module.eval()
    predicted, gold = [], []
    for batch in batches:
        _, (p, g) = module.collect(batch)
        predicted += p
        gold += g
    return score(module.task, predicted, gold)
