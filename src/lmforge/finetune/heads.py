"""Task heads on a backbone's last hidden states (B, T, d_model).

- SequenceHead: one label per sequence (or sentence pair). `cls` pools position 0 through BERT's tanh
  pooler (Devlin et al. 2018); `last` takes the last real token, which is the only one a causal
  decoder lets see the whole input (GPT, Radford et al. 2018, 3.3), found from the attention mask so
  padding on either side is harmless; `mean` averages real tokens (sentence-transformers).
- TokenHead: one label per token (tagging; labels sit on first sub-words, `spans.align_word_labels`).
- SpanHead: start and end logits per token for extractive QA; positions outside the context get
  -inf, so a span can only be predicted where an answer can be (`spans.best_spans`).
- LabelWords: text-to-text classification (T5, Raffel et al. 2020): each label is written as words,
  and the encoder-decoder scores every label's words given the input, teacher-forced. Its score is the
  log-likelihood of those words; training minimises it for the gold label (T5's loss on the target
  text) and prediction picks the most likely label (decoding constrained to the label set). It adds no
  parameters: the backbone's own decoder and output projection do the work.
"""

from __future__ import annotations

from enum import Enum

import torch
from torch import nn

from lmforge.objectives.collate import pad


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


class LabelWords(nn.Module):
    def __init__(self, label_ids: list[list[int]], pad_id: int) -> None:
        """`label_ids`: each label's token ids, ending with EOS. The decoder starts from `pad_id` (T5)."""
        super().__init__()
        if not label_ids or any(not ids for ids in label_ids):
            raise ValueError(f"LabelWords needs token ids for every label, got {label_ids!r}")
        targets, valid = pad(label_ids, pad_id)
        valid = valid.bool()
        start = torch.full((len(label_ids), 1), pad_id, dtype=torch.long)
        self.register_buffer("targets", targets, persistent=False)  # (n_labels, L)
        self.register_buffer("valid", valid, persistent=False)  # (n_labels, L)
        self.register_buffer("inputs", torch.cat([start, targets[:, :-1]], 1), persistent=False)

    def forward(self, backbone: nn.Module, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, n_labels): log p(label words | input) for every example and label."""
        batch, n = input_ids.shape[0], self.targets.shape[0]
        memory = backbone.encode(input_ids, mask).last_hidden_state  # (B, T, d), encoded once
        memory, source_mask = memory.repeat_interleave(n, 0), mask.repeat_interleave(n, 0)
        decoder_mask = torch.cat([torch.ones_like(self.valid[:, :1]), self.valid[:, :-1]], 1)
        logits = backbone(
            None,
            source_mask,
            self.inputs.repeat(batch, 1),
            decoder_mask.repeat(batch, 1),
            memory=memory,
        ).logits  # (B * n, L, V)
        log_probs = logits.float().log_softmax(-1).gather(-1, self.targets.repeat(batch, 1)[..., None])
        return (log_probs.squeeze(-1) * self.valid.repeat(batch, 1)).sum(-1).view(batch, n)
