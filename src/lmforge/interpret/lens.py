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


def _layers(nll: list[float], correct: list[int], count: int) -> list[dict[str, float]]:
    return [
        {"layer": i, "loss": n / count, "accuracy": c / count} for i, (n, c) in enumerate(zip(nll, correct))
    ]


@torch.no_grad()
def logit_lens(model: nn.Module, windows: Iterable[torch.Tensor]) -> list[dict[str, float]]:
    """Per layer (0 = embeddings): mean next-token loss (nats) and top-1 accuracy over `windows`,
    each (B, T) of token ids; every position but the last of a window predicts the next token."""
    nll: list[float] = []
    correct: list[int] = []
    count = 0
    for ids in windows:
        out = model(ids, output_hidden_states=True)
        targets = ids[:, 1:].reshape(-1)
        if not nll:
            nll, correct = [0.0] * len(out.hidden_states), [0] * len(out.hidden_states)
        for layer, hidden in enumerate(out.hidden_states):
            logits = read_layer(model, hidden)[:, :-1].reshape(-1, model.config.vocab_size)
            nll[layer] += F.cross_entropy(logits, targets, reduction="sum").item()
            correct[layer] += (logits.argmax(-1) == targets).sum().item()
        count += targets.numel()
    if count == 0:
        raise ValueError("logit_lens: got no tokens, expected at least one window of two tokens")
    return _layers(nll, correct, count)


@torch.no_grad()
def masked_logit_lens(model: nn.Module, batches: Iterable[dict[str, torch.Tensor]]) -> list[dict[str, float]]:
    """Per layer (0 = embeddings) of an encoder: mean loss (nats) and top-1 accuracy of the original
    token at the masked positions of `batches` (`input_ids`, `attention_mask`, `labels`: -100 except
    where a token was selected)."""
    nll: list[float] = []
    correct: list[int] = []
    count = 0
    for batch in batches:
        predict = batch["labels"] != IGNORE_INDEX
        out = model(batch["input_ids"], attention_mask=batch.get("attention_mask"), output_hidden_states=True)
        targets = batch["labels"][predict]
        if not nll:
            nll, correct = [0.0] * len(out.hidden_states), [0] * len(out.hidden_states)
        for layer, hidden in enumerate(out.hidden_states):
            logits = read_layer(model, hidden, predict)
            nll[layer] += F.cross_entropy(logits, targets, reduction="sum").item()
            correct[layer] += (logits.argmax(-1) == targets).sum().item()
        count += targets.numel()
    if count == 0:
        raise ValueError("masked_logit_lens: got no masked position, expected batches with selected tokens")
    return _layers(nll, correct, count)
