"""What every model's forward returns."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ModelOutput:
    logits: torch.Tensor  # (B, T, V), or (N, V) at the positions selected by predict_mask
    last_hidden_state: torch.Tensor  # (B, T, d_model) after the final norm (the decoder's, for enc-dec)
    hidden_states: list[torch.Tensor] | None = None  # per layer, for the logit lens and distillation
    attentions: list[torch.Tensor] | None = None  # per layer (B, H, Tq, Tk), for attention maps
    encoder_last_hidden_state: torch.Tensor | None = None  # encoder-decoder only
