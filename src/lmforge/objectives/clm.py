"""Causal language modelling objective: predict token t + 1 from tokens 0..t (Radford et al. 2018).

Labels arrive unshifted (`labels == input_ids` up to padding); the shift happens here by moving
the labels left and appending -100, so the `(B, T, V)` logits are used as they are (a view, no copy).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch.nn.functional as F
from torch import Tensor, nn

from lmforge.objectives.losses import check_label_smoothing, token_cross_entropy
from lmforge.objectives.masking import IGNORE_INDEX


class CausalLMObjective(nn.Module):
    """`objective(model, batch) -> (loss, stats)` for GPT-style pretraining.

    Batch: `input_ids`, `labels`, optional `attention_mask`, all `(B, T)`.
    Stats (detached 0-dim): loss, accuracy, n_tokens, nll_sum, n_correct.
    """

    def __init__(self, label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.label_smoothing = check_label_smoothing(label_smoothing)

    def forward(self, model: nn.Module, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        out = model(batch["input_ids"], attention_mask=batch.get("attention_mask"))
        logits = out.logits  # (B, T, V)
        next_labels = F.pad(batch["labels"][:, 1:], (0, 1), value=IGNORE_INDEX)  # (B, T)
        result = token_cross_entropy(
            logits.reshape(-1, logits.shape[-1]), next_labels.reshape(-1), self.label_smoothing
        )
        return result.loss, result.stats()
