"""The LightningModule of fine-tuning: a backbone from `build_model`, a task head, AdamW + schedule.

Like `PretrainModule` it takes plain config dicts (saved by `save_hyperparameters`, so checkpoints load
with `weights_only=True`) and builds the network itself; the stage puts the starting weights into
`backbone` (scratch, our pretraining checkpoint, or a Hugging Face folder) and applies LoRA or
freezing (`lmforge.finetune.adapt`) before training. Validation collects every example's prediction
and scores the whole split with the task's metrics; `val/<first metric>` selects checkpoints.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch

from lmforge.config import load_model_config
from lmforge.errors import ConfigError
from lmforge.finetune.metrics import LABEL_METRICS, squad_scores
from lmforge.finetune.tasks import TASKS, TaskKind, task_config
from lmforge.model import build_model
from lmforge.training.config import optim_config
from lmforge.training.optim import optimization


def score(kind: TaskKind, metrics: list[str], predicted: list, gold: list, n_labels: int) -> dict[str, float]:
    """The task's metrics over a whole split's predictions."""
    if kind is TaskKind.qa:
        scores = squad_scores(predicted, gold)
        return {name: scores[name] for name in metrics}
    if kind is TaskKind.tagging:  # per-sentence lists of first-sub-word tags -> one flat sequence
        predicted = [t for sentence in predicted for t in sentence]
        gold = [t for sentence in gold for t in sentence]
    p, g = torch.tensor(predicted), torch.tensor(gold)
    return {name: LABEL_METRICS[name](p, g, n_labels) for name in metrics}


class FinetuneModule(L.LightningModule):
    def __init__(self, model: dict[str, Any], task: dict[str, Any], optim: dict[str, Any], max_steps: int):
        super().__init__()
        self.save_hyperparameters()
        self.model_config = load_model_config(model)
        self.task = task_config(task)
        self.spec = TASKS[self.task.kind]
        if self.model_config.family not in self.spec.families:
            allowed = ", ".join(sorted(f.value for f in self.spec.families))
            raise ConfigError(
                f"model.family: got {self.model_config.family.value} for task {self.task.name} "
                f"({self.task.kind.value}), expected one of: {allowed}"
            )
        self.optim_config = optim_config(optim)
        self.backbone = build_model(self.model_config)
        self.head = self.spec.head(self.model_config, self.task)
        self._predicted: list = []
        self._gold: list = []

    def forward(self, batch: dict[str, Any]) -> Any:
        segments = batch["token_type_ids"] if self.model_config.n_segments else None
        hidden = self.backbone.features(batch["input_ids"], batch["attention_mask"], segments)
        return self.head(hidden, batch[self.spec.mask_key])

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss = self.spec.loss(self(batch), batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["input_ids"].shape[0])
        return loss

    def on_validation_epoch_start(self) -> None:
        self._predicted, self._gold = [], []

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        outputs, (predicted, gold) = self.collect(batch)
        if self.task.kind is not TaskKind.qa or (batch["start"] >= 0).all():  # a cut answer has no loss
            self.log("val/loss", self.spec.loss(outputs, batch), batch_size=batch["input_ids"].shape[0])
        self._predicted += predicted
        self._gold += gold

    def collect(self, batch: dict[str, Any]) -> tuple[Any, tuple[list, list]]:
        """The head's outputs and the (predicted, gold) values of each example in `batch`."""
        outputs = self(batch)
        return outputs, self.spec.predictions(outputs, batch, self.task)

    def on_validation_epoch_end(self) -> None:
        for name, value in self.split_scores().items():
            self.log(f"val/{name}", value, prog_bar=True)

    def split_scores(self) -> dict[str, float]:
        """The task's metrics over everything validated since the epoch started."""
        return score(self.task.kind, self.task.metrics, self._predicted, self._gold, len(self.task.labels))

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        return optimization(params, self.optim_config, self.model_config.d_model, self.hparams.max_steps)


@torch.no_grad()
def evaluate(module: FinetuneModule, batches) -> dict[str, float]:
    """The task's metrics of `module` (in eval mode) over every example of `batches`."""
    module.eval()
    predicted, gold = [], []
    for batch in batches:
        _, (p, g) = module.collect(batch)
        predicted += p
        gold += g
    return score(module.task.kind, module.task.metrics, predicted, gold, len(module.task.labels))
