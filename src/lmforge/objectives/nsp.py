"""Next-sentence prediction head: BERT's pooler on the [CLS] state, then a 2-way classifier.

Devlin et al. 2018, section 3.1 ("Task #2: Next Sentence Prediction") and the reference
implementation: pooled = tanh(W_p h_[CLS] + b_p); logits = W_c pooled + b_c. In our items
(`SentencePairDataset`) label 1 means "B follows A" (IsNext) and 0 means "B comes from another
document" (NotNext); the reference implementation uses the opposite coding, which changes nothing.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class NSPHead(nn.Module):
    """Pooler (dense + tanh on position 0) and a Linear(d_model, 2) classifier."""

    def __init__(self, d_model: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.pooler = nn.Linear(d_model, d_model)
        self.classifier = nn.Linear(d_model, 2)
        for linear in (self.pooler, self.classifier):  # BERT's truncated-normal-like init
            nn.init.normal_(linear.weight, std=init_std)
            nn.init.zeros_(linear.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        """Hidden states `(B, T, d_model)` -> NSP logits `(B, 2)`."""
        pooled = torch.tanh(self.pooler(hidden[:, 0]))  # (B, d_model)
        return self.classifier(pooled)  # (B, 2)
