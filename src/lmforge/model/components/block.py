"""One Transformer layer: self-attention, optional cross-attention, MLP, each a residual sublayer
(`mlp: false` leaves the MLP out: an attention-only layer, where induction heads are easiest to see).

    pre-norm  (GPT-2, LLaMA, T5):  x = x + f(norm(x))
    post-norm (2017, BERT):        x = norm(x + f(x))      "Add & Norm"

Dropout is applied to each sublayer's output before the residual add, as in Vaswani et al. 2017.
With `embedding_skip` the layer's input first mixes in the embedding output x0, x = a * x + b * x0
(learnt a = 1, b = 0 at the start); a layer that reads a value-embedding table hands its rows to the
self-attention.
"""

from __future__ import annotations

import torch
from torch import nn

from lmforge.model.components.attention import Attention
from lmforge.model.components.kv_cache import LayerCache
from lmforge.model.components.mlp import MLP
from lmforge.model.components.norms import build_norm
from lmforge.model.config import ModelConfig, Placement


class Block(nn.Module):
    def __init__(
        self, config: ModelConfig, cross_attention: bool = False, value_embedding: bool = False
    ) -> None:
        super().__init__()
        self.pre_norm = config.norm_placement is Placement.pre
        self.skip_mix = nn.Parameter(torch.tensor([1.0, 0.0])) if config.embedding_skip else None
        self.attn_norm = build_norm(config)
        self.attn = Attention(config, value_embedding)
        self.cross_norm = build_norm(config) if cross_attention else None
        self.cross_attn = Attention(config) if cross_attention else None
        self.mlp_norm = build_norm(config) if config.mlp else None
        self.mlp = MLP(config) if config.mlp else None
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,  # (B, T, d_model)
        mask: torch.Tensor | None,
        *,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        is_causal: bool = False,
        memory: torch.Tensor | None = None,  # (B, Tm, d_model) encoder output
        memory_mask: torch.Tensor | None = None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
        x0: torch.Tensor | None = None,  # (B, T, d_model) the embedding output, with embedding_skip
        value_embedding: torch.Tensor | None = None,  # (B, T, n_kv_heads * head_dim)
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.skip_mix is not None:
            if x0 is None:
                raise ValueError("embedding_skip: the layer needs the embedding output x0")
            x = self.skip_mix[0] * x + self.skip_mix[1] * x0
        h, weights = self.attn(
            self._in(x, self.attn_norm),
            mask,
            rope=rope,
            is_causal=is_causal,
            cache=cache.self_attn if cache else None,
            need_weights=need_weights,
            value_embedding=value_embedding,
        )
        x = self._out(x, h, self.attn_norm)
        if self.cross_attn is not None:
            h, _ = self.cross_attn(
                self._in(x, self.cross_norm),
                memory_mask,
                context=memory,
                cache=cache.cross_attn if cache else None,
            )
            x = self._out(x, h, self.cross_norm)
        if self.mlp is not None:
            x = self._out(x, self.mlp(self._in(x, self.mlp_norm)), self.mlp_norm)
        return x, weights

    def _in(self, x: torch.Tensor, norm: nn.Module | None) -> torch.Tensor:
        return norm(x) if self.pre_norm else x

    def _out(self, x: torch.Tensor, h: torch.Tensor, norm: nn.Module | None) -> torch.Tensor:
        x = x + self.dropout(h)
        return x if self.pre_norm else norm(x)
