"""The logit lens (nostalgebraist 2020): each layer's residual stream read through the final norm and
the unembedding, as if the model stopped there. Layer 0 is the embeddings; the last layer's reading is
the model's own output. Next-token loss and top-1 accuracy per layer show where the prediction forms;
for an encoder, the loss and accuracy at masked positions (`masked_logit_lens`).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from lmforge.objectives.masking import IGNORE_INDEX


def read_layer(
    model: nn.Module, hidden: torch.Tensor, predict_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits (B, T, V) of one residual stream through the model's final norm and vocabulary head; with
    `predict_mask` (B, T), only its rows (N, V), as the model's own sparse MLM prediction."""
    norm = model.stack.final_norm
    return model.head(norm(hidden) if norm is not None else hidden, predict_mask)


def _summed(readings: Iterable[tuple[list[torch.Tensor], torch.Tensor]], what: str) -> list[dict[str, float]]:
    """Per layer: mean loss and top-1 accuracy over every batch's (each layer's logits (N, V), targets (N,))."""
    nll: list[float] = []
    correct: list[int] = []
    count = 0
    for layers, targets in readings:
        if not nll:
            nll, correct = [0.0] * len(layers), [0] * len(layers)
        for layer, logits in enumerate(layers):
            nll[layer] += F.cross_entropy(logits, targets, reduction="sum").item()
            correct[layer] += (logits.argmax(-1) == targets).sum().item()
        count += targets.numel()
    if count == 0:
        raise ValueError(what)
    return [
        {"layer": i, "loss": n / count, "accuracy": c / count} for i, (n, c) in enumerate(zip(nll, correct))
    ]


@torch.no_grad()
def logit_lens(model: nn.Module, windows: Iterable[torch.Tensor]) -> list[dict[str, float]]:
    """Per layer (0 = embeddings): mean next-token loss (nats) and top-1 accuracy over `windows`,
    each (B, T) of token ids; every position but the last of a window predicts the next token."""

    def readings():
        for ids in windows:
            hidden = model(ids, output_hidden_states=True).hidden_states
            V = model.config.vocab_size
            yield [read_layer(model, h)[:, :-1].reshape(-1, V) for h in hidden], ids[:, 1:].reshape(-1)

    return _summed(readings(), "logit_lens: got no tokens, expected at least one window of two tokens")


@torch.no_grad()
def masked_logit_lens(model: nn.Module, batches: Iterable[dict[str, torch.Tensor]]) -> list[dict[str, float]]:
    """Per layer (0 = embeddings) of an encoder: mean loss (nats) and top-1 accuracy of the original
    token at the masked positions of `batches` (`input_ids`, `attention_mask`, `labels`: -100 except
    where a token was selected)."""

    def readings():
        for batch in batches:
            predict = batch["labels"] != IGNORE_INDEX
            ids, mask = batch["input_ids"], batch.get("attention_mask")
            hidden = model(ids, attention_mask=mask, output_hidden_states=True).hidden_states
            yield [read_layer(model, h, predict) for h in hidden], batch["labels"][predict]

    return _summed(
        readings(), "masked_logit_lens: got no masked position, expected batches with selected tokens"
    )
