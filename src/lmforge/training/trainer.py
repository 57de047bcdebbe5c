"""The one Lightning `Trainer` construction: the `trainer` group's settings plus a stage's own wiring.

Every loop (pretraining, distillation, fine-tuning, translation, scaling cells) builds its Trainer
here, so accelerator, devices, nodes, strategy, precision, gradient clipping and accumulation mean the
same in every stage, and every stage runs on GPUs or under DDP/FSDP the same way. A stage's wiring
(callbacks, folders, and for a stage with its own loop length, such as fine-tuning's `max_steps`)
replaces the group's value of the same name.

Lightning checks accelerator, devices, strategy and precision when the Trainer is built; a setting
this machine cannot run (an accelerator it lacks, an unknown strategy) becomes one `ConfigError`
line naming the settings, raised before the stage has written or deleted anything.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import lightning as L
from lightning.fabric.utilities.exceptions import MisconfigurationException

from lmforge.errors import ConfigError
from lmforge.training.checkpoints import FileCheckpointIO
from lmforge.training.config import TrainerConfig

CHECKED = ("accelerator", "devices", "num_nodes", "strategy", "precision")  # what Lightning may refuse


def build_trainer(
    trainer: TrainerConfig,
    *,
    mlflow_run: tuple[str, str] | None = None,
    log_lr: bool = False,
    metric_names: dict[str, str | None] | None = None,
    callbacks: list[L.Callback] | None = None,
    **wiring: Any,
) -> L.Trainer:
    """`L.Trainer` from the group's settings, `wiring` replacing any of the same name.

    `mlflow_run` (run id, tracking uri): log the module's `train/` and `val/` metrics to that MLflow
    run (`lmforge.tracking.active_run()` for the stage's own run) every `log_every_n_steps` optimizer
    steps, renamed by `metric_names` (`StepMetrics`); `log_lr` adds the learning rate."""
    settings = {f.name: getattr(trainer, f.name) for f in dataclasses.fields(trainer) if f.name != "name"}
    settings.update(wiring)
    callbacks = list(callbacks or [])
    if mlflow_run is not None:
        from lmforge.tracking.metrics import StepMetrics  # observability: imported only for a tracked run

        every = int(settings.get("log_every_n_steps") or 1)
        callbacks.append(StepMetrics(*mlflow_run, every=every, names=metric_names, lr=log_lr))
    try:
        return L.Trainer(**settings, logger=False, callbacks=callbacks, plugins=[FileCheckpointIO()])
    except (MisconfigurationException, ValueError, ImportError) as err:  # ImportError: tpu without torch_xla
        given = ", ".join(f"trainer.{key}={settings[key]}" for key in CHECKED if key in settings)
        reason = " ".join(str(err).split())[:200]
        raise ConfigError(
            f"trainer: {given} refused by Lightning ({reason}); expected settings this machine can run"
        ) from None
