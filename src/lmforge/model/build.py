"""Build a model from a ModelConfig: the family picks the assembly, nothing else is dispatched on."""

from __future__ import annotations

from torch import nn

from lmforge.model.config import Family, ModelConfig
from lmforge.model.encoder_decoder import EncoderDecoder
from lmforge.model.language_model import TransformerLM

FAMILIES: dict[Family, type[nn.Module]] = {
    Family.encoder: TransformerLM,
    Family.decoder: TransformerLM,
    Family.encoder_decoder: EncoderDecoder,
}


def build_model(config: ModelConfig) -> nn.Module:
    return FAMILIES[config.family](config)
