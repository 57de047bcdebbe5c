"""Attention masks built from small vectorised predicates on (query index, key index).

    causal          sliding window (w=3, causal)    padding (last key is [PAD])
    q\\k 0 1 2 3      q\\k 0 1 2 3                    q\\k 0 1 2 3
    0   x . . .      0   x . . .                     0   x x x .
    1   x x . .      1   x x . .                     1   x x x .
    2   x x x .      2   x x x .                     2   x x x .
    3   x x x x      3   . x x x                     3   x x x x  <- a query always sees itself

Indices are absolute positions in the (possibly cached) sequence, so the same predicates serve a full
forward pass and one step of KV-cache decoding. `True` means "may attend", as in
`torch.nn.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

import torch


def self_attention_mask(
    q_idx: torch.Tensor,
    k_idx: torch.Tensor,
    *,
    causal: bool,
    window: int | None = None,
    key_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Boolean mask (B or 1, 1, Tq, Tk) for queries at q_idx (Tq,) over keys at k_idx (Tk,).

    key_valid (B, Tk) marks real tokens (False at padding). With `window`, a causal query sees the last
    `window` keys including itself; a bidirectional query sees keys with |q - k| < window.
    """
    q = q_idx[:, None]  # (Tq, 1)
    k = k_idx[None, :]  # (1, Tk)
    allowed = torch.ones(q.shape[0], k.shape[1], dtype=torch.bool, device=q_idx.device)
    if causal:
        allowed = allowed & (k <= q)
    if window is not None:
        allowed = allowed & ((q - k).abs() < window)
    allowed = allowed[None, None]  # (1, 1, Tq, Tk)
    if key_valid is not None:
        allowed = allowed & key_valid[:, None, None, :].bool()
    # A padded query would otherwise see no key at all and softmax would return NaN.
    return allowed | (q == k)[None, None]


def padding_mask(key_valid: torch.Tensor | None) -> torch.Tensor | None:
    """Cross-attention mask (B, 1, 1, Tk) from key_valid (B, Tk); None when nothing is padded."""
    if key_valid is None:
        return None
    return key_valid[:, None, None, :].bool()


def with_bias(allowed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Fold a boolean mask into an additive position bias (B, H, Tq, Tk): -inf where not allowed."""
    if bias is None:
        return allowed
    return bias.masked_fill(~allowed, float("-inf"))
