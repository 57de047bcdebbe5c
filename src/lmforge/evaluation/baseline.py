"""Unigram baseline: predict every target from the training split's target-token frequencies.

Whatever the objective (next tokens, masked tokens, corrupted spans), a model that learned nothing
about context does no better than this; a trained model must beat it clearly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from lmforge.objectives import IGNORE_INDEX
from lmforge.training.config import ObjectiveKind


def targets_of(batch: dict[str, torch.Tensor], kind: ObjectiveKind) -> torch.Tensor:
    """The token ids an objective predicts in `batch`, flattened (N,)."""
    labels = batch["labels"]
    if kind is ObjectiveKind.clm:
        labels = labels[:, 1:]  # position t predicts token t + 1
    return labels[labels != IGNORE_INDEX]


class UnigramBaseline:
    """Add-one smoothed target frequencies over `vocab_size` tokens."""

    def __init__(self, vocab_size: int) -> None:
        self.counts = torch.ones(vocab_size, dtype=torch.float64)

    def fit(self, batches: Iterable[dict[str, torch.Tensor]], kind: ObjectiveKind) -> UnigramBaseline:
        for batch in batches:
            self.counts += torch.bincount(targets_of(batch, kind), minlength=len(self.counts)).double()
        return self

    def score(self, batches: Iterable[dict[str, torch.Tensor]], kind: ObjectiveKind) -> dict[str, float]:
        log_probs = (self.counts / self.counts.sum()).log()
        top = int(self.counts.argmax())
        nll, n, correct = 0.0, 0, 0
        for batch in batches:
            targets = targets_of(batch, kind)
            nll -= float(log_probs[targets].sum())
            n += targets.numel()
            correct += int((targets == top).sum())
        loss = nll / max(n, 1)
        return {"loss": loss, "perplexity": math.exp(loss), "accuracy": correct / max(n, 1), "n_tokens": n}
