"""Interoperability with Hugging Face-format model folders: `load_pretrained(folder)` builds our model
with the folder's weights (BERT, GPT-2, LLaMA, Mistral and T5 checkpoints)."""

from lmforge.hf.load import Pretrained, load_pretrained

__all__ = ["Pretrained", "load_pretrained"]
