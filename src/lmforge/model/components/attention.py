"""Multi-head attention for every family: self or cross, MHA / GQA / MQA, optional RoPE and KV cache.

One implementation on `F.scaled_dot_product_attention` serves causal, padding, sliding-window and
ALiBi / relative-bias masks (all arrive as one `mask`); `n_kv_heads < n_heads` shares each K/V head
among a group of query heads (Ainslie et al. 2023; n_kv_heads = 1 is MQA, Shazeer 2019).
When attention maps are requested the same maths runs explicitly, softmax(QK^T * scale + mask) V,
so the probabilities can be returned. The scale is 1/sqrt(head_dim) unless `attention_scale` sets it
(T5 uses 1: its initialisation absorbs the factor). With `qk_norm` each head's queries and keys are
RMS-normalised (with a learnt gain over head_dim) before RoPE and the cache, so the logits stay
bounded however the projections grow. A self-attention given a value embedding (the token's row of a
`ValueEmbeddings` table) mixes it into its values, v = a * v + b * ve, with learnt a and b.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lmforge.model.components.kv_cache import KVCache
from lmforge.model.components.norms import RMSNorm
from lmforge.model.config import ModelConfig


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, H, T, D) by angles given as cos/sin (B, 1, T, D) ("rotate half" pairing)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, value_embedding: bool = False) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.n_kv_heads = config.kv_heads
        self.head_dim = config.head_size
        self.dropout = config.attention_dropout
        self.sdpa_scale = config.attention_scale  # None: SDPA's own 1/sqrt(head_dim)
        self.scale = config.attention_scale or 1.0 / math.sqrt(self.head_dim)
        d, bias = config.d_model, config.bias
        self.q_proj = nn.Linear(d, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d, self.n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d, self.n_kv_heads * self.head_dim, bias=bias)
        self.out_proj = nn.Linear(self.n_heads * self.head_dim, d, bias=bias)
        # QK-norm: one gain over head_dim shared by the heads, as in Qwen3's q_norm / k_norm
        self.q_norm = RMSNorm(self.head_dim, config.norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, config.norm_eps) if config.qk_norm else None
        # a, b of v = a * v + b * ve, 0.5 each at the start as in the speedrun
        self.value_mix = nn.Parameter(torch.full((2,), 0.5)) if value_embedding else None

    def _split(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def forward(
        self,
        x: torch.Tensor,  # (B, Tq, d_model)
        mask: torch.Tensor | None = None,  # bool or additive, broadcastable to (B, H, Tq, Tk)
        *,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,  # cos, sin for the query positions
        context: torch.Tensor | None = None,  # (B, Tk, d_model) encoder memory for cross-attention
        cache: KVCache | None = None,
        is_causal: bool = False,  # fast path: plain causal mask, only when `mask` is None
        need_weights: bool = False,
        value_embedding: torch.Tensor | None = None,  # (B, Tq, n_kv_heads * head_dim), self-attention only
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if rope is not None and context is not None:
            raise ValueError("rotary positions are not used in cross-attention")
        q = self._split(self.q_proj(x), self.n_heads)
        if self.q_norm is not None:
            q = self.q_norm(q)
        if context is not None and cache is not None and cache.length > 0:
            k, v = cache.k, cache.v  # cross-attention memory projected at the first step
        else:
            source = x if context is None else context
            k = self._split(self.k_proj(source), self.n_kv_heads)
            v = self._split(self.v_proj(source), self.n_kv_heads)
            if (value_embedding is None) != (self.value_mix is None):
                raise ValueError(
                    "a value embedding goes with a self-attention built for one (value_embedding=True)"
                )
            if value_embedding is not None:
                v = self.value_mix[0] * v + self.value_mix[1] * self._split(value_embedding, self.n_kv_heads)
            if self.k_norm is not None:
                k = self.k_norm(k)
            if rope is not None:
                q, k = apply_rope(q, *rope), apply_rope(k, *rope)
            if cache is not None:
                k, v = cache.update(k, v)
        dropout = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = self._explicit(q, k, v, mask, is_causal, dropout)
        else:
            weights = None
            out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=mask,
                dropout_p=dropout,
                is_causal=is_causal,
                scale=self.sdpa_scale,
                enable_gqa=self.n_kv_heads != self.n_heads,
            )  # (B, H, Tq, D)
        B, _, T, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(B, T, -1)), weights

    def _explicit(self, q, k, v, mask, is_causal, dropout):
        """The textbook computation; returns the attention probabilities (B, H, Tq, Tk) too."""
        groups = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = q @ k.transpose(-2, -1) * self.scale  # (B, H, Tq, Tk)
        if is_causal:
            Tq, Tk = scores.shape[-2:]
            mask = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
        weights = scores.float().softmax(-1).type_as(q)
        return F.dropout(weights, dropout) @ v, weights
