"""Callbacks that make a run's record survive interruption: loss curves, throughput and RNG state.

`CurveWriter` records the train loss per logged step and the validation metrics per evaluation,
and the tokens trained on, and writes the curves as CSV (atomically) under the run's reports folder
at the end of fitting; DVC plots them. Its rows and token count are part of every checkpoint, so a
resumed run writes the whole curve of the run. Its clock (`train_seconds`, `wall_seconds`,
`tokens_per_second`) is not: a checkpoint holds only what the run's inputs decide (`lmforge.timings`).
The clock goes to the run's timings file instead, written at every checkpoint and at the end; a
resumed run continues it from there when the file was written at the checkpoint it resumes from
(same token count), and otherwise times only its own session and says so (`whole_run: false`).

`lmforge.tracking.metrics.StepMetrics` logs the same numbers to an MLflow run, at the same steps:
the optimizer step after the update (`trainer.global_step`), so MLflow, the CSV curves and the plots
agree.

`RandomState` puts the global torch RNG (which dropout draws from) into checkpoints and restores it
just before the first training batch after a resume, so dropout masks continue where they stopped.
"""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

from lmforge.io import write_text
from lmforge.timings import read_clock_file, write_clock_file

TRAIN_COLUMNS = {"train/nll": "train_loss", "train/nsp_loss": "train_nsp_loss"}
VAL_COLUMNS = {
    "val/loss": "val_loss",
    "val/accuracy": "val_accuracy",
    "val/nsp_loss": "val_nsp_loss",
    "val/nsp_accuracy": "val_nsp_accuracy",
    "val/content_accuracy": "val_content_accuracy",
}


class CurveWriter(L.Callback):
    def __init__(self, reports_dir: str, every_n_steps: int = 10, timings: str | Path | None = None) -> None:
        self.reports_dir = Path(reports_dir)
        self.every = every_n_steps
        self.timings = Path(timings) if timings is not None else None  # the clock's file, if any
        self.train: list[dict[str, float]] = []
        self.val: list[dict[str, float]] = []
        self.tokens = 0  # training tokens over all processes, whole run
        self.timed_tokens = 0  # the tokens of the batches that train_seconds timed
        self.train_seconds = 0.0  # time inside training batches, whole run (or since the resume)
        self.wall_before = 0.0  # wall time of the sessions before this one (resumed runs)
        self.whole_run = True  # False: resumed without the clock of the sessions before
        self._batch_start = self._fit_start = 0.0

    @property
    def wall_seconds(self) -> float:
        return self.wall_before + (time.perf_counter() - self._fit_start if self._fit_start else 0.0)

    def on_fit_start(self, trainer, module) -> None:
        self._fit_start = time.perf_counter()

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.train_seconds += time.perf_counter() - self._batch_start
        tokens = int(batch["input_ids"].numel()) * trainer.world_size
        self.tokens += tokens
        self.timed_tokens += tokens
        step = trainer.global_step
        if step % self.every == 0 and (not self.train or self.train[-1]["step"] != step):
            row = _row(step, trainer.callback_metrics, TRAIN_COLUMNS)
            if len(row) > 1:
                self.train.append(row)

    def on_validation_end(self, trainer, module) -> None:
        if trainer.sanity_checking or "val/loss" not in trainer.callback_metrics:
            return
        self.val.append(_row(trainer.global_step, trainer.callback_metrics, VAL_COLUMNS))

    def on_fit_end(self, trainer, module) -> None:
        if trainer.is_global_zero:
            _write_csv(self.reports_dir / "train_loss.csv", self.train, ["step", "train_loss"])
            _write_csv(self.reports_dir / "val_loss.csv", self.val, ["step", "val_loss"])
            self._write_clock()

    def on_save_checkpoint(self, trainer, module, checkpoint) -> None:
        if trainer.is_global_zero:
            self._write_clock()

    def clock(self) -> dict[str, Any]:
        """The run's timings: what its timings file and MLflow get, never a checkpoint."""
        return {
            "tokens_seen": self.tokens,
            "timed_tokens": self.timed_tokens,
            "tokens_per_second": self.tokens_per_second,
            "train_seconds": self.train_seconds,
            "wall_seconds": self.wall_seconds,
            "whole_run": self.whole_run,
        }

    def clock_metrics(self) -> dict[str, float]:
        """The clock's numbers a stage logs to MLflow beside its metrics: throughput and wall time."""
        return {"tokens_per_second": float(self.tokens_per_second), "wall_seconds": float(self.wall_seconds)}

    def _write_clock(self) -> None:
        if self.timings is not None:
            write_clock_file(self.timings, self.clock())  # best effort: a clock never fails a run

    def state_dict(self) -> dict[str, Any]:
        return {"train": self.train, "val": self.val, "tokens": self.tokens}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.train, self.val = list(state["train"]), list(state["val"])
        self.tokens = int(state["tokens"])
        before = read_clock_file(self.timings)
        try:
            if before["tokens_seen"] != self.tokens:
                raise KeyError("tokens_seen")  # written at another checkpoint
            self.timed_tokens, self.whole_run = int(before["timed_tokens"]), bool(before["whole_run"])
            self.train_seconds, self.wall_before = (
                float(before["train_seconds"]),
                float(before["wall_seconds"]),
            )
        except (KeyError, TypeError, ValueError):
            self.timed_tokens, self.train_seconds, self.wall_before, self.whole_run = 0, 0.0, 0.0, False

    @property
    def tokens_per_second(self) -> float:
        return self.timed_tokens / self.train_seconds if self.train_seconds else 0.0


class RandomState(L.Callback):
    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._pending = state  # applied at the first batch: setting up the loop must not shift it

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if self._pending is not None:
            torch.set_rng_state(self._pending["torch"])
            if "cuda" in self._pending and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(self._pending["cuda"])
            self._pending = None


def _row(step: int, metrics: dict[str, Any], columns: dict[str, str]) -> dict[str, float]:
    row: dict[str, float] = {"step": step}
    for key, column in columns.items():
        if key in metrics:
            row[column] = float(metrics[key])
    return row


def _write_csv(path: Path, rows: list[dict[str, float]], required: list[str]) -> None:
    columns = required + [c for c in {k: None for row in rows for k in row} if c not in required]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, buffer.getvalue())
