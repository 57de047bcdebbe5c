"""Causal language modelling objective: predict token t + 1 from tokens 0..t (Radford et al. 2018).

Labels arrive unshifted (`labels == input_ids` up to padding); the shift happens here by moving
the labels left and appending -100, so the `(B, T, V)` logits are used as they are (a view, no copy).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch.nn.functional as F
from torch import Tensor, nn

from lmforge.objectives.losses import check_label_smoothing, head_cross_entropy, token_cross_entropy
from lmforge.objectives.masking import IGNORE_INDEX


class CausalLMObjective(nn.Module):
    """`objective(model, batch) -> (loss, stats)` for GPT-style pretraining.

    Batch: `input_ids`, `labels`, optional `attention_mask`, all `(B, T)`.
    Stats (detached 0-dim): loss, accuracy, n_tokens, nll_sum, n_correct.
    """

    def __init__(self, label_smoothing: float = 0.0, loss_chunk: int | None = None) -> None:
        super().__init__()
        self.label_smoothing = check_label_smoothing(label_smoothing)
        self.loss_chunk = loss_chunk  # rows per fused head + loss chunk; None: the head's logits

    def forward(self, model: nn.Module, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        next_labels = F.pad(batch["labels"][:, 1:], (0, 1), value=IGNORE_INDEX).reshape(-1)  # (B * T,)
        if self.loss_chunk is None:  # any model that returns logits (Hugging Face's too)
            logits = model(batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
            result = token_cross_entropy(
                logits.reshape(-1, logits.shape[-1]), next_labels, self.label_smoothing
            )
        else:  # the head fused with the loss: no (B, T, V) logits
            hidden = model.features(batch["input_ids"], batch.get("attention_mask"))  # (B, T, D)
            hidden = hidden.reshape(-1, hidden.shape[-1])
            result = head_cross_entropy(
                model.head, hidden, next_labels, self.label_smoothing, self.loss_chunk
            )
        return result.loss, result.stats()
