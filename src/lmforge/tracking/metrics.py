"""The training curves of a tracked run, sent to MLflow: `StepMetrics`, the Lightning callback that
the one Trainer construction (`lmforge.training.trainer.build_trainer`) adds when a stage runs under
an MLflow run. It queues each step's metrics in the run's outbox, which a background thread sends.
Observability: no stage depends on this module.
"""

from __future__ import annotations

import time

import lightning as L

from lmforge.tracking.outbox import outbox_for


class StepMetrics(L.Callback):
    """Every `every` optimizer steps the `train/` metrics the module logged (and the learning rate),
    after each validation the `val/` ones, to MLflow run `run_id`, renamed by `names` (a name mapped
    to None is not logged). Rank zero only; Lightning's own MLflow logger is not used, so nothing
    else logs (its hyperparameters, a step behind)."""

    def __init__(
        self, run_id: str, uri: str, every: int, names: dict[str, str | None] | None = None, lr: bool = False
    ) -> None:
        self.run_id, self.uri = run_id, uri
        self.every, self.names, self.lr = every, dict(names or {}), lr
        self._last = -1

    def _log(self, trainer, prefix: str, extra: dict[str, float] | None = None) -> None:
        if not trainer.is_global_zero:
            return
        values = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(prefix)}
        values = {self.names.get(k, k): v for k, v in values.items() if self.names.get(k, k) is not None}
        values.update(extra or {})
        if values:  # queued: the step never waits on the network (lmforge.tracking.outbox)
            outbox_for(self.run_id, self.uri).put(trainer.global_step, values, int(time.time() * 1000))

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
