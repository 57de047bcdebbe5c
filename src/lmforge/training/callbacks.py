"""Callbacks: loss curves for `dvc plots` and a throughput meter.

`CurveWriter` records train loss per logged step and validation loss per evaluation, and writes
them as CSV (atomically) under the run's reports folder at the end of fitting; DVC plots them.
"""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import lightning as L

from lmforge.io import write_text


class CurveWriter(L.Callback):
    def __init__(self, reports_dir: str, every_n_steps: int = 10) -> None:
        self.reports_dir = Path(reports_dir)
        self.every = every_n_steps
        self.train: list[dict[str, float]] = []
        self.val: list[dict[str, float]] = []
        self.tokens = 0
        self.train_seconds = 0.0
        self._start = 0.0

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.train_seconds += time.perf_counter() - self._start
        self.tokens += int(batch["input_ids"].numel()) * trainer.world_size
        step = trainer.global_step
        if step % self.every == 0 and "train/loss" in trainer.callback_metrics:
            self.train.append({"step": step, "train_loss": float(trainer.callback_metrics["train/loss"])})

    def on_validation_end(self, trainer, module) -> None:
        if trainer.sanity_checking or "val/loss" not in trainer.callback_metrics:
            return
        self.val.append(
            {"step": trainer.global_step, "val_loss": float(trainer.callback_metrics["val/loss"])}
        )

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.train_seconds if self.train_seconds else 0.0

    def on_fit_end(self, trainer, module) -> None:
        if trainer.is_global_zero:
            _write_csv(self.reports_dir / "train_loss.csv", ["step", "train_loss"], self.train)
            _write_csv(self.reports_dir / "val_loss.csv", ["step", "val_loss"], self.val)


def _write_csv(path: Path, columns: list[str], rows: list[dict[str, float]]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, buffer.getvalue())
