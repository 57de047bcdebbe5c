"""Unigram baseline: predict every target from the training split's target-token frequencies.

Whatever the objective (next tokens, masked tokens, corrupted spans), a model that learned nothing
about context does no better than this; a trained model must beat it clearly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from lmforge.training.objectives import Batch


class UnigramBaseline:
    """Add-one smoothed target frequencies over `vocab_size` tokens."""

    def __init__(self, vocab_size: int) -> None:
        self.counts = torch.ones(vocab_size, dtype=torch.float64)

    def fit(self, batches: Iterable[Batch], targets: Callable[[Batch], torch.Tensor]) -> UnigramBaseline:
        """Count `targets(batch)`, the token ids the objective predicts (`ObjectiveSpec.targets`)."""
        for batch in batches:
            self.counts += torch.bincount(targets(batch), minlength=len(self.counts)).double()
        return self

    def score(self, batches: Iterable[Batch], targets: Callable[[Batch], torch.Tensor]) -> dict[str, float]:
        log_probs = (self.counts / self.counts.sum()).log()
        top = int(self.counts.argmax())
        nll, n, correct = 0.0, 0, 0
        for batch in batches:
            predicted = targets(batch)
            nll -= float(log_probs[predicted].sum())
            n += predicted.numel()
            correct += int((predicted == top).sum())
        loss = nll / max(n, 1)
        return {"loss": loss, "perplexity": math.exp(loss), "accuracy": correct / max(n, 1), "n_tokens": n}
