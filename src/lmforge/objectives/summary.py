"""Split-level metrics from the per-batch sums every objective reports (validation and test alike).

Per-batch means cannot be averaged into a split mean when batches hold different numbers of
targets, so objectives report sums (`nll_sum`, `n_tokens`, ...), `SplitSums` adds them up (and across
processes, as one tensor), and `summarise` turns the totals into per-token and per-pair metrics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

SUM_KEYS = (
    "nll_sum",  # unsmoothed negative log-likelihood of the predicted targets
    "n_tokens",  # predicted targets (masked tokens, next tokens, span-corruption targets)
    "n_correct",  # targets whose argmax prediction is right
    "nsp_nll_sum",  # next-sentence prediction: summed cross entropy over pairs
    "nsp_n",  # pairs
    "nsp_correct",
    "n_content",  # span corruption: targets that are dropped text, not sentinels or EOS
    "n_content_correct",
)


class SplitSums:
    """Running totals of SUM_KEYS over the batches of one split."""

    def __init__(self) -> None:
        self.totals = torch.zeros(len(SUM_KEYS), dtype=torch.float64)

    def update(self, stats: Mapping[str, Tensor]) -> None:
        for i, key in enumerate(SUM_KEYS):
            if key in stats:
                self.totals[i] += float(stats[key])

    def as_dict(self) -> dict[str, float]:
        return dict(zip(SUM_KEYS, self.totals.tolist()))


def summarise(sums: Mapping[str, float]) -> dict[str, float]:
    """loss (nats per target), perplexity, accuracy, n_tokens; nsp_loss/nsp_accuracy and
    content_accuracy when the objective reported them."""
    n = sums["n_tokens"]
    loss = sums["nll_sum"] / max(n, 1.0)
    out = {
        "loss": loss,
        "perplexity": math.exp(min(loss, 50.0)),
        "accuracy": sums["n_correct"] / max(n, 1.0),
        "n_tokens": n,
    }
    if sums.get("nsp_n", 0) > 0:
        out["nsp_loss"] = sums["nsp_nll_sum"] / sums["nsp_n"]
        out["nsp_accuracy"] = sums["nsp_correct"] / sums["nsp_n"]
    if sums.get("n_content", 0) > 0:
        out["content_accuracy"] = sums["n_content_correct"] / sums["n_content"]
    return out
