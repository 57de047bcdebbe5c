"""The training curves of a tracked run, sent to MLflow: `StepMetrics`, the Lightning callback that
the one Trainer construction (`lmforge.training.trainer.build_trainer`) adds when a stage runs under
an MLflow run. Observability: no stage depends on this module.
"""

from __future__ import annotations

import time

import lightning as L


class StepMetrics(L.Callback):
    """Every `every` optimizer steps the `train/` metrics the module logged (and the learning rate),
    after each validation the `val/` ones, to MLflow run `run_id`, renamed by `names` (a name mapped
    to None is not logged). Rank zero only; Lightning's own MLflow logger is not used, so nothing
    else logs (its hyperparameters, a step behind)."""

    def __init__(
        self, run_id: str, uri: str, every: int, names: dict[str, str | None] | None = None, lr: bool = False
    ) -> None:
        from mlflow.tracking import MlflowClient

        self.client, self.run_id = MlflowClient(tracking_uri=uri), run_id
        self.every, self.names, self.lr = every, dict(names or {}), lr
        self._last = -1

    def _log(self, trainer, prefix: str, extra: dict[str, float] | None = None) -> None:
        from mlflow.entities import Metric

        if not trainer.is_global_zero:
            return
        values = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(prefix)}
        values = {self.names.get(k, k): v for k, v in values.items() if self.names.get(k, k) is not None}
        values.update(extra or {})
        now, step = int(time.time() * 1000), trainer.global_step
        if values:
            self.client.log_batch(
                self.run_id, metrics=[Metric(k, v, now, step) for k, v in sorted(values.items())]
            )

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step % self.every or step == self._last:
            return
        self._last = step
        extra = {}
        if self.lr and trainer.optimizers:
            extra["train/lr"] = float(trainer.optimizers[0].param_groups[0]["lr"])
        self._log(trainer, "train/", extra)

    def on_validation_end(self, trainer, module) -> None:
        if not trainer.sanity_checking:
            self._log(trainer, "val/")
