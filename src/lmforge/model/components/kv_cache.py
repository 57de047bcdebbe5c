"""Key/value cache for incremental decoding (one per attention layer), preallocated to a maximum length.

Keys are cached after RoPE is applied, so a cached key never needs rotating again. Sliding-window
layers keep the whole history and rely on the mask: simple, and exact; memory is O(max_len).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


class KVCache:
    """Keys and values of shape (B, H_kv, max_len, D); `update` appends and returns the filled prefix."""

    def __init__(self, batch: int, n_kv_heads: int, max_len: int, head_dim: int, *, device=None, dtype=None):
        shape = (batch, n_kv_heads, max_len, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0

    @property
    def max_len(self) -> int:
        return self.k.shape[2]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache overflow: {end} positions, cache holds {self.max_len}")
        self.k[:, :, self.length : end] = k
        self.v[:, :, self.length : end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]


@dataclass
class LayerCache:
    """What one block caches: its self-attention history and, in a decoder with cross-attention, the
    projected encoder memory (computed at the first step, reused at every later one)."""

    self_attn: KVCache
    cross_attn: KVCache | None = None


def cache_length(cache: list[LayerCache] | None) -> int:
    return cache[0].self_attn.length if cache else 0
