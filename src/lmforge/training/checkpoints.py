"""Checkpoints that are safe to write and safe to read.

Writing: `Checkpoints` keeps two files in the run's folder, each written to a temporary file in
that folder, flushed to disk and renamed (`FileCheckpointIO`, every Trainer's checkpoint writer), so
a run killed mid-write, or a disk that fills, leaves the previous complete file, never a half-written
one, and no temporary file behind (a full disk is one `StorageError` line with the bytes needed):

    best.ckpt   weights + hyperparameters of the lowest `val/loss` so far (what evaluation loads)
    last.ckpt   everything resume needs: weights, optimizer, schedule step, loop counters, data
                position, RNG and curve state; written every `every_n_steps` optimizer steps (after
                validation when both fall on one step) and when training ends
    step<N>.ckpt weights + hyperparameters at each step of `keep_steps` (pretraining compute
                checkpoints: the downstream effect of 10%, 30%, 100% of the steps)

Reading: `read_checkpoint` loads with `torch.load(weights_only=True)`, which refuses any pickled
object other than tensors and plain containers, so a crafted file cannot run code; an empty,
truncated, random or foreign file is one `DataError` line naming it. `load_module` rebuilds the
`PretrainModule` from the plain hyperparameters and refuses weights of another architecture.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from lmforge.errors import ConfigError, DataError
from lmforge.io import write_bytes

EXPECTED = "a checkpoint written by the lmforge pretrain stage"


class Checkpoints(Checkpoint):
    def __init__(
        self, dirpath: str | os.PathLike, every_n_steps: int, keep_steps: Iterable[int] = ()
    ) -> None:
        self.dirpath, self.every = Path(dirpath), every_n_steps
        self.keep_steps = frozenset(keep_steps)
        self.best_score: float | None = None
        self.best_step: int | None = None
        self._last_saved_step = -1

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step in self.keep_steps and not (self.dirpath / f"step{step}.ckpt").is_file():
            self._save(trainer, f"step{step}.ckpt", weights_only=True)
        validates_now = (trainer.fit_loop.epoch_loop.total_batch_idx + 1) % trainer.val_check_batch == 0
        if step % self.every == 0 and not validates_now:  # else saved after validation, below
            self._save_last(trainer)

    def on_validation_end(self, trainer, module) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        score = trainer.callback_metrics.get("val/loss")
        if score is not None and (self.best_score is None or float(score) < self.best_score):
            self.best_score, self.best_step = float(score), trainer.global_step
            self._save(trainer, "best.ckpt", weights_only=True)
        if trainer.global_step % self.every == 0:
            self._save_last(trainer)

    def on_train_end(self, trainer, module) -> None:
        self._save_last(trainer)

    def _save_last(self, trainer: L.Trainer) -> None:
        if trainer.global_step != self._last_saved_step:  # once per optimizer step (accumulation)
            self._save(trainer, "last.ckpt")
            self._last_saved_step = trainer.global_step

    def _save(self, trainer: L.Trainer, name: str, weights_only: bool = False) -> None:
        # every rank calls; rank zero writes (FileCheckpointIO), and all wait for it
        trainer.save_checkpoint(self.dirpath / name, weights_only=weights_only)

    def state_dict(self) -> dict[str, Any]:
        return {"best_score": self.best_score, "best_step": self.best_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_score, self.best_step = state["best_score"], state["best_step"]


def save_file(path: str | os.PathLike, checkpoint: dict[str, Any]) -> None:
    """`torch.save` of `checkpoint` into `path`: serialised in memory first, so its size is known and
    a file system without room for it is refused before a byte is written (`lmforge.io.write_bytes`)."""
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    write_bytes(path, buffer.getbuffer())


class FileCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer with `save_file`: the temporary file in the checkpoint's own folder
    (Lightning's goes through the system's temporary folder first), flushed before the rename."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError(f"storage_options={storage_options!r}: expected none for a local checkpoint")
        save_file(path, checkpoint)


def read_checkpoint(
    path: str | os.PathLike, needs: tuple[str, ...] = ("state_dict", "hyper_parameters")
) -> dict:
    """The checkpoint's plain contents, or one DataError line naming the file and what was expected."""
    path = Path(path)
    if not path.is_file():
        raise DataError(
            f"checkpoint {path} does not exist; expected {EXPECTED} (run the pretrain stage first)"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if (found := refused_object(str(err))) is None:  # not a refused object: bytes that are no pickle
            reason = str(err).split("WeightsUnpickler error:")[-1]
            raise DataError(
                f"checkpoint {path} is unreadable ({_first_line(reason)}); expected {EXPECTED}"
            ) from None
        raise DataError(
            f"checkpoint {path} holds a pickled object that is not tensors or plain data ({found}), "
            f"refused unread; expected {EXPECTED}"
        ) from None
    except Exception as err:  # empty, truncated or not a torch file at all
        raise DataError(
            f"checkpoint {path} is unreadable ({_first_line(err)}); expected {EXPECTED}"
        ) from None
    missing = [key for key in needs if not isinstance(checkpoint, dict) or key not in checkpoint]
    if missing:
        raise DataError(f"checkpoint {path} has no '{missing[0]}'; expected {EXPECTED}")
    return checkpoint


REFUSED = re.compile(r"(?:unsupported GLOBAL|Unsupported global:?)\s+(?:GLOBAL\s+)?([\w.]+)", re.IGNORECASE)


def refused_object(message: str) -> str | None:
    """What torch's weights-only unpickler refused ('posix.system'), from its error text; None when
    the error is about bytes that are no pickle at all. Torch's advice to load the file with
    `weights_only=False` is never passed on: that would run the object."""
    match = REFUSED.search(message)
    return f"global {match.group(1)}" if match else None


def _first_line(err: Exception | str) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def load_module(path: str | os.PathLike):
    """A `PretrainModule` in eval mode, rebuilt from a checkpoint's hyperparameters and weights."""
    from lmforge.training.module import PretrainModule

    checkpoint = read_checkpoint(path)
    try:
        module = PretrainModule.from_hparams(checkpoint["hyper_parameters"])
    except (ConfigError, TypeError) as err:
        raise DataError(
            f"checkpoint {path} has hyperparameters that build no model ({err}); expected {EXPECTED}"
        ) from None
    check_weights(module, checkpoint, path)
    return module.eval()


def check_weights(module: torch.nn.Module, checkpoint: dict, path: str | os.PathLike) -> None:
    """Load the checkpoint's weights into `module`, or one line saying they belong to another model."""
    try:
        module.load_state_dict(checkpoint["state_dict"], strict=True)
    except RuntimeError as err:
        detail = " ".join(str(err).split())[:200]
        raise DataError(
            f"checkpoint {path} holds weights of another architecture ({detail}); expected weights for "
            "the configured model"
        ) from None
