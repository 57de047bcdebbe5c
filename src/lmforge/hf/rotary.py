"""RoFormer's rotary layout beside ours, both ways. RoFormer rotates interleaved pairs (2k, 2k+1) of
each query/key head where our rotary rotates halves (k, k + d/2): `halves_from_pairs` reorders its rows
on import (`lmforge.hf.roformer`), `interleave_rotary` on export (`lmforge.hf.bert.bert_tensors`, which
writes BERT and RoFormer alike); `roformer_table` is the fixed sinusoidal table RoFormer stores, checked
on import and written on export."""

from __future__ import annotations

import torch


def halves_from_pairs(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of a query/key projection (or bias) from interleaved pairs to rotate-half order: within
    each head, row k <- 2k and row k + d/2 <- 2k + 1 (the inverse of the exporter's interleave)."""
    head = weight.shape[0] // n_heads
    order = torch.cat([torch.arange(0, head, 2), torch.arange(1, head, 2)])
    per_head = weight.reshape(n_heads, head, *weight.shape[1:])
    return per_head[:, order].reshape(weight.shape)


def interleave_rotary(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of a query/key projection (or its bias) from rotate-half order to RoFormer's interleaved
    pairs: within each head, row 2k <- k and row 2k+1 <- k + d/2."""
    head = weight.shape[0] // n_heads
    order = torch.arange(head).view(2, head // 2).t().reshape(-1)  # 0, d/2, 1, d/2+1, ...
    per_head = weight.reshape(n_heads, head, *weight.shape[1:])
    return per_head[:, order].reshape(weight.shape)


def roformer_table(positions: int, dim: int) -> torch.Tensor:
    """RoFormer's fixed sinusoidal table (sin of every pair's angle, then cos), computed as it does."""
    pair = torch.arange(dim, dtype=torch.float64) // 2
    angles = torch.arange(positions, dtype=torch.float64)[:, None] / torch.pow(10000.0, 2 * pair / dim)
    return torch.cat([angles[:, 0::2].sin(), angles[:, 1::2].cos()], dim=1).float()
