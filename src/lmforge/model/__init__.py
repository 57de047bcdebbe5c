"""The model library: `build_model(ModelConfig)` gives an encoder, decoder or encoder-decoder Transformer."""

from lmforge.model.build import build_model
from lmforge.model.generation import generate
from lmforge.model.output import ModelOutput
from lmforge.model.params import count_parameters

__all__ = ["ModelOutput", "build_model", "count_parameters", "generate"]
