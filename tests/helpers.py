"""Small builders shared by tests (importable because pytest puts tests/ on the path)."""

from __future__ import annotations

from lmforge.config import ModelConfig


def tiny(**overrides) -> ModelConfig:
    """A model small enough that a test forward takes milliseconds."""
    values = dict(vocab_size=61, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=64)
    values.update(overrides)
    return ModelConfig(**values)
