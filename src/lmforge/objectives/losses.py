"""Token-level cross entropy with the sums an epoch needs for exact per-token averages.

Label smoothing (Szegedy et al. 2016; used by Vaswani et al. 2017 with epsilon 0.1) changes the
training loss only: `F.cross_entropy(..., label_smoothing=eps)` is `(1 - eps) * NLL + eps * mean_c(-log p_c)`.
Perplexity is always reported from the plain NLL, exp(sum NLL / number of tokens), so `nll_sum` is
computed without smoothing and summed over tokens, never averaged per batch.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from lmforge.errors import ConfigError
from lmforge.objectives.masking import IGNORE_INDEX


class TokenLoss(NamedTuple):
    loss: Tensor  # 0-dim, mean over counted tokens, label-smoothed; carries the gradient
    nll_sum: Tensor  # 0-dim float32, sum of unsmoothed NLL over counted tokens (detached)
    n_tokens: Tensor  # 0-dim long, tokens whose target is not IGNORE_INDEX
    n_correct: Tensor  # 0-dim long, counted tokens whose argmax equals the target

    def stats(self) -> dict[str, Tensor]:
        """The detached stats every objective reports: loss, accuracy and the sums behind them."""
        return {
            "loss": self.loss.detach(),
            "accuracy": ratio(self.n_correct, self.n_tokens),
            "n_tokens": self.n_tokens,
            "nll_sum": self.nll_sum,
            "n_correct": self.n_correct,
        }


def check_label_smoothing(value: float) -> float:
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"label_smoothing={value}: expected a value in [0, 1)")
    return float(value)


def token_cross_entropy(logits: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> TokenLoss:
    """Cross entropy of `logits` `(N, V)` against `targets` `(N,)`, skipping IGNORE_INDEX targets.

    The mean divides by the number of counted tokens (at least 1), so a batch with nothing to
    predict gives a zero loss that still backpropagates instead of NaN.
    """
    counted = targets != IGNORE_INDEX  # (N,)
    n_tokens = counted.sum()
    loss_sum = F.cross_entropy(
        logits, targets, ignore_index=IGNORE_INDEX, reduction="sum", label_smoothing=label_smoothing
    )
    with torch.no_grad():
        if label_smoothing == 0.0:
            nll_sum = loss_sum.detach().float()
        else:
            nll_sum = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX, reduction="sum")
        n_correct = ((logits.argmax(dim=-1) == targets) & counted).sum()
    return TokenLoss(loss_sum / n_tokens.clamp(min=1), nll_sum, n_tokens, n_correct)


def ratio(numerator: Tensor, denominator: Tensor) -> Tensor:
    """`numerator / denominator` as float, 0 when the denominator is 0 (an empty batch)."""
    return numerator.float() / denominator.clamp(min=1).float()
