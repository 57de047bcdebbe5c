"""lmforge: raw text to trained, distilled and fine-tuned Transformer language models, reproducibly."""

__version__ = "0.1.0"
