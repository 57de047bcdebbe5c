"""Attention maps and what each head attends to on average.

Per head, over windows of real text: the mean attention to the previous token (previous-token
heads), to the window's first token (the "attention sink" of Xiao et al. 2023; an encoder's [CLS]) and
the mean entropy of the attention row in nats (low: the head looks at few tokens). Causal rows at
position t spread over t + 1 keys, so the entropy is compared with the uniform row's mean log(t + 1);
an encoder's rows spread over all T keys, so with log T.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


@torch.no_grad()
def head_statistics(
    model: nn.Module, windows: Iterable[torch.Tensor], causal: bool = True
) -> dict[str, torch.Tensor]:
    """(layers, heads) tensors: previous_token, first_token, entropy (rows 1..T-1); and
    uniform_entropy, a scalar: that of rows spreading evenly over the keys they see (`causal`: 0..t)."""
    sums: dict[str, torch.Tensor] = {}
    rows = 0
    T = 0
    for ids in windows:
        T = ids.shape[1]
        attn = torch.stack(model(ids, output_attentions=True).attentions)  # (layers, B, H, T, T)
        t = torch.arange(1, T)
        stats = {
            "previous_token": attn[:, :, :, t, t - 1].sum(dim=(1, 3)),  # rows 1..T-1
            "first_token": attn[:, :, :, 1:, 0].sum(dim=(1, 3)),
            "entropy": -(attn * attn.clamp_min(1e-12).log()).sum(-1)[:, :, :, 1:].sum(dim=(1, 3)),
        }
        for key, value in stats.items():
            sums[key] = value if key not in sums else sums[key] + value
        rows += ids.shape[0] * (T - 1)
    if rows == 0:
        raise ValueError("head_statistics: got no windows of two or more tokens")
    out = {key: value / rows for key, value in sums.items()}
    keys = torch.arange(2, T + 1, dtype=torch.float) if causal else torch.full((T - 1,), float(T))
    out["uniform_entropy"] = torch.log(keys).mean()
    return out


@torch.no_grad()
def attention_maps(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """(layers, heads, T, T): one sequence's attention probabilities, every layer and head."""
    return torch.stack(model(ids[None], output_attentions=True).attentions)[:, 0]
