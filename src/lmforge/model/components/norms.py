"""Normalisation layers: LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019), chosen by name."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lmforge.model.config import ModelConfig, Norm


class RMSNorm(nn.Module):
    """x / rms(x) * gamma, with rms(x) = sqrt(mean(x^2) + eps); no mean subtraction, no bias."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            # The same formula as one op: equal outputs; its forward is fused, its backward on the CPU
            # is elementwise ops, so eager it runs at a fraction of LayerNorm's speed (benchmarks/norms.py).
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        # Normalise in fp32 so bf16 activations do not lose the small-variance tail.
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def build_norm(config: ModelConfig) -> nn.Module:
    if config.norm is Norm.rms:
        return RMSNorm(config.d_model, eps=config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)
