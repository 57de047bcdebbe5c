"""Input embeddings (token + position + segment) and the output head (optionally tied to the input)."""

from __future__ import annotations

import math

import torch
from torch import nn

from lmforge.model.components.mlp import ACTIVATIONS
from lmforge.model.components.norms import build_norm
from lmforge.model.components.positions import sinusoidal_table
from lmforge.model.config import ModelConfig, Position


class Embeddings(nn.Module):
    """tok(x) * scale + pos(positions) + seg(token_type_ids), then optional norm and dropout."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d = config.d_model
        self.tok = nn.Embedding(config.vocab_size, d)
        self.scale = math.sqrt(d) if config.scale_embeddings else 1.0
        self.pos = nn.Embedding(config.max_seq_len, d) if config.position is Position.learned else None
        if config.position is Position.sinusoidal:
            self.register_buffer("sinusoid", sinusoidal_table(config.max_seq_len, d), persistent=False)
        else:
            self.sinusoid = None
        self.seg = nn.Embedding(config.n_segments, d) if config.n_segments else None
        self.norm = build_norm(config) if config.embedding_norm else None
        self.dropout = nn.Dropout(config.embedding_dropout)

    def forward(
        self,
        input_ids: torch.Tensor,  # (B, T)
        positions: torch.Tensor,  # (B or 1, T)
        token_type_ids: torch.Tensor | None = None,  # (B, T) segment ids
    ) -> torch.Tensor:
        x = self.tok(input_ids) * self.scale
        if self.pos is not None:
            x = x + self.pos(positions)
        if self.sinusoid is not None:
            x = x + self.sinusoid[positions].to(x.dtype)
        if token_type_ids is not None and self.seg is None:
            raise ValueError("token_type_ids given, but the model has no segment embeddings (n_segments=0)")
        if self.seg is not None:
            x = x + self.seg(token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids))
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


class ValueEmbeddings(nn.Module):
    """`value_embeddings` tables of one row per token, each as wide as the attention's values
    (n_kv_heads * head_dim); `ModelConfig.value_table` says which layer reads which table."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        width = config.kv_heads * config.head_size
        self.tables = nn.ModuleList(
            nn.Embedding(config.vocab_size, width) for _ in range(config.value_embeddings)
        )

    def forward(self, input_ids: torch.Tensor) -> list[torch.Tensor]:  # (B, T) -> [(B, T, width)] per table
        return [table(input_ids) for table in self.tables]


class LMHead(nn.Module):
    """Vocabulary projection; with `head_transform` first dense + activation + norm (BERT's MLM head);
    with `scale_output` the hidden state is first multiplied by d_model^-0.5 (T5 with tied embeddings);
    with `logit_softcap` c the logits are c * tanh(logits / c) (Gemma 2).

    `predict_mask` (B, T) restricts the projection to selected positions (sparse MLM prediction): the
    result is (N, V) for the N selected positions, in row-major order.
    """

    def __init__(self, config: ModelConfig, embedding: nn.Embedding) -> None:
        super().__init__()
        if config.head_transform:
            self.transform = nn.Sequential(
                nn.Linear(config.d_model, config.d_model, bias=config.bias),
                _Activation(config),
                build_norm(config),
            )
        else:
            self.transform = None
        self.scale = config.d_model**-0.5 if config.scale_output else None
        self.softcap = config.logit_softcap  # logits = c * tanh(logits / c) when set
        self.proj = nn.Linear(config.d_model, config.vocab_size, bias=config.head_bias)
        if config.tie_embeddings:
            self.proj.weight = embedding.weight

    def forward(self, hidden: torch.Tensor, predict_mask: torch.Tensor | None = None) -> torch.Tensor:
        if predict_mask is not None:
            hidden = hidden[predict_mask]  # (N, d_model)
        if self.scale is not None:
            hidden = hidden * self.scale
        if self.transform is not None:
            hidden = self.transform(hidden)
        logits = self.proj(hidden)
        return logits if self.softcap is None else self.softcap * torch.tanh(logits / self.softcap)


class _Activation(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.fn = ACTIVATIONS[config.activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)
