"""The probe run during training: induction scores (textbook and shifted), repeated-token losses and in-context learning,
measured on fixed inputs every `every` optimizer steps (and before the first and after the last),
beside the loss of that step's training batch."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch

from lmforge.interpret.induction import (
    icl_score,
    induction_scores,
    repeat_losses,
    shifted_induction_scores,
    token_losses,
)


def probe(
    model: torch.nn.Module,
    sequences: torch.Tensor,
    shifted: torch.Tensor,
    windows: list[torch.Tensor],
    positions: tuple[int, int, int],
) -> dict[str, float]:
    """One row of the curve: the best head's induction score and where it is, the best head's shifted
    score over `sequences` and `shifted` (another copy length) with its shift, the two copies' losses,
    and the ICL score and mean loss of the natural-text `windows`."""
    scores = induction_scores(model, sequences)  # (layers, heads)
    best = int(scores.argmax())
    by_shift = shifted_induction_scores(model, [sequences, shifted])  # (layers, heads, shifts)
    layer, head, shift = (int(i) for i in torch.unravel_index(by_shift.argmax(), by_shift.shape))
    losses = token_losses(model, windows)
    early, late, band = positions
    return {
        "max_induction_score": scores.max().item(),
        "best_layer": best // scores.shape[1] + 1,
        "best_head": best % scores.shape[1] + 1,
        "max_shifted_score": by_shift.max().item(),
        "shifted_layer": layer + 1,
        "shifted_head": head + 1,
        "shift": shift,
        **repeat_losses(model, sequences),
        "icl_score": icl_score(losses.mean(0), early, late, band),
        "loss": losses.mean().item(),
    }


class InductionProbe(L.Callback):
    """Appends a `probe` row, with its step and tokens seen, to `rows`."""

    def __init__(
        self,
        sequences: torch.Tensor,
        shifted: torch.Tensor,
        windows: list[torch.Tensor],
        positions: tuple[int, int, int],
        every: int,
        tokens_per_step: int,
    ) -> None:
        self.sequences, self.shifted, self.windows, self.positions = sequences, shifted, windows, positions
        self.every, self.tokens_per_step = every, tokens_per_step
        self.rows: list[dict[str, Any]] = []

    def record(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        step = trainer.global_step
        if self.rows and self.rows[-1]["step"] == step:
            return
        # the loss of the step's training batch (the task the run learns; nan before the first step)
        train_loss = float(trainer.callback_metrics.get("train/nll", float("nan"))) if step else float("nan")
        model = pl_module.model
        was_training = model.training
        model.eval()
        with torch.no_grad():
            row = probe(
                model,
                self.sequences.to(pl_module.device),
                self.shifted.to(pl_module.device),
                [w.to(pl_module.device) for w in self.windows],
                self.positions,
            )
        model.train(was_training)
        self.rows.append(
            {"step": step, "tokens": step * self.tokens_per_step, "train_loss": train_loss, **row}
        )

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.record(trainer, pl_module)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if trainer.global_step % self.every == 0:
            self.record(trainer, pl_module)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.record(trainer, pl_module)
