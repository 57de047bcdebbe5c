"""What the per-architecture modules share: the rule type, HF activation names, the refusal line."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from lmforge.errors import DataError

Replacement = str | Callable[[re.Match], str] | None  # as re.sub takes it; None keeps the tensor in `extra`
Rules = list[tuple[str, Replacement]]  # (regex over the whole HF name, replacement)

# HF activation names -> ours; `gelu_new`/`gelu_pytorch_tanh` are the tanh approximation (GPT-2).
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


def refuse(hf: dict[str, Any], key: str, expected: str) -> None:
    raise DataError(
        f"config.json: {key}={hf.get(key)!r} cannot be expressed by ModelConfig; expected {expected}"
    )


def activation(hf: dict[str, Any], key: str) -> str:
    name = hf.get(key, "gelu")
    if name not in ACTIVATIONS:
        refuse(hf, key, f"one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]
