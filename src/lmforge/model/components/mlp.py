"""Position-wise feed-forward network: ReLU (2017, T5), GELU (BERT; tanh-approximated in GPT-2), or a
gated unit, SwiGLU (LLaMA) or GEGLU (T5 v1.1) (Shazeer 2020, "GLU Variants Improve Transformer")."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from lmforge.model.config import Activation, ModelConfig

# The element-wise function of each activation; for gated ones, the function applied to the gate.
ACTIVATIONS = {
    Activation.relu: F.relu,
    Activation.gelu: F.gelu,
    Activation.gelu_tanh: functools.partial(F.gelu, approximate="tanh"),
    Activation.swiglu: F.silu,
    Activation.geglu: functools.partial(F.gelu, approximate="tanh"),
    Activation.relu2: lambda x: F.relu(x).square(),
}
GATED = {Activation.swiglu, Activation.geglu}


class MLP(nn.Module):
    """fc_out(act(fc_in(x))), or gated: fc_out(act(fc_gate(x)) * fc_in(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, d_ff, bias = config.d_model, config.d_ff, config.bias
        self.act = ACTIVATIONS[config.activation]
        self.fc_in = nn.Linear(d, d_ff, bias=bias)
        self.fc_gate = nn.Linear(d, d_ff, bias=bias) if config.activation in GATED else None
        self.fc_out = nn.Linear(d_ff, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fc_gate is not None:
            return self.fc_out(self.act(self.fc_gate(x)) * self.fc_in(x))
        return self.fc_out(self.act(self.fc_in(x)))
