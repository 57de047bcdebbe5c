"""Position-wise feed-forward network: ReLU (2017, T5), GELU (BERT, GPT-2) or SwiGLU (Shazeer 2020)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lmforge.config import Activation, ModelConfig

ACTIVATIONS = {Activation.relu: F.relu, Activation.gelu: F.gelu, Activation.swiglu: F.silu}


class MLP(nn.Module):
    """fc_out(act(fc_in(x))), or with SwiGLU fc_out(silu(fc_gate(x)) * fc_in(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, d_ff, bias = config.d_model, config.d_ff, config.bias
        self.act = ACTIVATIONS[config.activation]
        self.fc_in = nn.Linear(d, d_ff, bias=bias)
        self.fc_gate = nn.Linear(d, d_ff, bias=bias) if config.activation is Activation.swiglu else None
        self.fc_out = nn.Linear(d_ff, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fc_gate is not None:
            return self.fc_out(self.act(self.fc_gate(x)) * self.fc_in(x))
        return self.fc_out(self.act(self.fc_in(x)))
