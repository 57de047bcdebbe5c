"""Position information: sinusoidal table, rotary embeddings, ALiBi slopes and T5 relative bias.

- Sinusoidal: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (Vaswani et al. 2017, 3.5).
- RoPE (Su et al. 2021): rotate each (x_i, x_{i+d/2}) pair of q and k by pos * theta_i, so the score
  q_m . k_n depends on m - n only. We use the "rotate half" pairing of GPT-NeoX / LLaMA checkpoints.
- ALiBi (Press et al. 2022): add -slope_h * |m - n| to the scores; slopes form the geometric sequence
  2^(-8/n), 2^(-16/n), ... for n heads (n a power of two; otherwise interleaved as in the paper's code).
- T5 relative bias (Raffel et al. 2020): a learned scalar per (head, bucket of m - n); small distances get
  their own bucket, larger ones share log-spaced buckets up to max_distance.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(n_positions: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """(n_positions, dim) table of the 2017 formula; even columns sin, odd columns cos."""
    position = torch.arange(n_positions, dtype=torch.float32)[:, None]  # (P, 1)
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)  # (dim/2,)
    angles = position * inv_freq  # (P, dim/2)
    table = torch.zeros(n_positions, dim)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table


class Rotary(nn.Module):
    """Precomputed cos/sin of RoPE, looked up per position; `attention.apply_rope` does the rotation."""

    def __init__(self, head_dim: int, max_positions: int, base: float = 10000.0) -> None:
        super().__init__()
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (D/2,)
        angles = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)  # (P, D/2)
        angles = torch.cat([angles, angles], dim=-1)  # (P, D): pair i with i + D/2
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for positions (B, T), each (B, 1, T, D) to broadcast over heads."""
        return self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Per-head slopes of ALiBi, (n_heads,)."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return torch.tensor(power_of_two(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    extra = power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(power_of_two(closest) + extra)


def alibi_bias(slopes: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """-slope * |m - n| for query positions (B, Tq) and key positions (B, Tk) -> (B, H, Tq, Tk).

    Symmetric in distance, so the same bias serves causal decoders (future keys are masked anyway)
    and bidirectional encoders.
    """
    distance = (q_pos[:, :, None] - k_pos[:, None, :]).abs().float()  # (B, Tq, Tk)
    return -slopes.to(distance.device)[None, :, None, None] * distance[:, None]


class RelativePositionBias(nn.Module):
    """T5's bucketed relative position bias: one learned scalar per (bucket, head)."""

    def __init__(self, n_heads: int, n_buckets: int, max_distance: int, bidirectional: bool) -> None:
        super().__init__()
        self.n_buckets = n_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.bias = nn.Embedding(n_buckets, n_heads)

    def bucket(self, relative: torch.Tensor) -> torch.Tensor:
        """Map relative positions (key - query) to bucket ids, as in T5."""
        n = self.n_buckets
        bucket = torch.zeros_like(relative)
        if self.bidirectional:
            n //= 2
            bucket = bucket + (relative > 0).long() * n
            distance = relative.abs()
        else:
            distance = (-relative).clamp(min=0)  # only the past is visible
        max_exact = n // 2
        is_small = distance < max_exact
        log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(
            self.max_distance / max_exact
        )
        large = max_exact + (log_ratio * (n - max_exact)).long()
        large = large.clamp(max=n - 1)
        return bucket + torch.where(is_small, distance, large)

    def forward(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(B, Tq) and (B, Tk) positions -> additive bias (B, H, Tq, Tk)."""
        relative = k_pos[:, None, :] - q_pos[:, :, None]  # (B, Tq, Tk)
        return self.bias(self.bucket(relative)).permute(0, 3, 1, 2)
