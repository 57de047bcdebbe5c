"""Task heads on a backbone's last hidden states (B, T, d_model).

- SequenceHead: one label per sequence (or sentence pair). `cls` pools position 0 through BERT's tanh
  pooler (Devlin et al. 2018); `last` takes the last real token, which is the only one a causal
  decoder lets see the whole input (GPT, Radford et al. 2018, 3.3), found from the attention mask so
  padding on either side is harmless; `mean` averages real tokens (sentence-transformers).
- TokenHead: one label per token (tagging; labels sit on first sub-words, `spans.align_word_labels`).
- SpanHead: start and end logits per token for extractive QA; positions outside the context get
  -inf, so a span can only be predicted where an answer can be (`spans.best_spans`).
"""

from __future__ import annotations

from enum import Enum

import torch
from torch import nn


class Pooling(str, Enum):
    cls = "cls"  # position 0 ([CLS]) through a dense + tanh pooler (BERT)
    last = "last"  # the last real token (decoders)
    mean = "mean"  # the mean over real tokens


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: Pooling) -> torch.Tensor:
    """(B, T, d) hidden states and a (B, T) bool mask of real tokens -> (B, d)."""
    if how is Pooling.cls:
        return hidden[:, 0]
    if how is Pooling.last:
        positions = torch.arange(mask.shape[1], device=mask.device)
        last = (positions * mask).argmax(-1)  # (B,) index of the last real token
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    weights = mask.to(hidden.dtype)[..., None]
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)


class SequenceHead(nn.Module):
    def __init__(self, d_model: int, n_labels: int, pooling: Pooling, dropout: float = 0.1) -> None:
        super().__init__()
        self.pooling = Pooling(pooling)
        self.pooler = nn.Linear(d_model, d_model) if self.pooling is Pooling.cls else None
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, n_labels)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pooled = pool(hidden, mask, self.pooling)  # (B, d)
        if self.pooler is not None:
            pooled = torch.tanh(self.pooler(pooled))
        return self.classifier(self.dropout(pooled))  # (B, n_labels)


class TokenHead(nn.Module):
    def __init__(self, d_model: int, n_labels: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, n_labels)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(hidden))  # (B, T, n_labels)


class SpanHead(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.qa_outputs = nn.Linear(d_model, 2)

    def forward(self, hidden: torch.Tensor, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(start, end) logits (B, T), -inf outside the context tokens."""
        start, end = self.qa_outputs(hidden).unbind(-1)
        blocked = ~context
        return start.masked_fill(blocked, float("-inf")), end.masked_fill(blocked, float("-inf"))
