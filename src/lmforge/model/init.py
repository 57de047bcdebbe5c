"""Weight initialisation: N(0, init_std) for weights and embeddings, zeros for biases, ones for norms;
projections that write into the residual stream (`out_proj`, `fc_out`) are scaled by 1/sqrt(2 * n_layers)
so the residual variance stays O(1) with depth (GPT-2, Radford et al. 2019, section 2.3), or start
at zero with `zero_init_residual` (every layer then starts as the identity)."""

from __future__ import annotations

import math

from torch import nn

from lmforge.model.config import ModelConfig

RESIDUAL_OUTPUTS = ("out_proj.weight", "fc_out.weight")


def init_weights(model: nn.Module, config: ModelConfig) -> None:
    std = config.init_std
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif hasattr(module, "weight") and module.weight is not None and module.weight.dim() == 1:
            nn.init.ones_(module.weight)  # LayerNorm / RMSNorm gain
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
    depth = max(config.n_layers, config.encoder_layers)
    for name, param in model.named_parameters():
        if name.endswith(RESIDUAL_OUTPUTS):
            if config.zero_init_residual:
                nn.init.zeros_(param)
            else:
                nn.init.normal_(param, mean=0.0, std=std / math.sqrt(2 * depth))
