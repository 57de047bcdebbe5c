"""What the per-architecture modules share: the rule type, HF activation names, the refusal line on
import; on export the state type, our activation names in HF's, and what no architecture (or a
family of them) can express."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from lmforge.errors import DataError

if TYPE_CHECKING:
    from lmforge.model.config import ModelConfig

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


# --- export: ModelConfig -> what an architecture cannot express; a tied head ----------------------


State = dict[str, torch.Tensor]


# Our activation -> HF's name for it (GPT-2's tanh approximation is `gelu_new`).
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


def config_value(config: ModelConfig, name: str) -> Any:
    value = getattr(config, name)
    return getattr(value, "value", value)


def needs(config: ModelConfig, **wanted: Any) -> list[str]:
    """'model.<field>=<value> (expected ...)' for each field whose value is not among the wanted."""
    out = []
    for name, allowed in wanted.items():
        allowed = allowed if isinstance(allowed, tuple) else (allowed,)
        if config_value(config, name) not in allowed:
            shown = " or ".join(map(str, allowed))
            out.append(f"model.{name}={config_value(config, name)} (expected {shown})")
    return out


def inexpressible(config: ModelConfig) -> list[str]:
    """What no exported architecture expresses: local attention, scaled embeddings, attention-only
    layers, QK-norm (Qwen3 and OLMo 2 have it), logit soft-capping (Gemma 2), value embeddings and the
    embedding skip (the speedrun's): we export none of those."""
    return needs(
        config,
        sliding_window=None,
        scale_embeddings=False,
        mlp=True,
        qk_norm=False,
        logit_softcap=None,
        value_embeddings=0,
        embedding_skip=False,
    )


def one_kv_head_per_query(config: ModelConfig) -> list[str]:
    """BERT, RoFormer, GPT-2 and GPT-NeoX: one key/value head per query head, head_dim = d/n_heads."""
    out = []
    if config.kv_heads != config.n_heads:
        out.append(f"model.n_kv_heads={config.n_kv_heads} (expected null: one key/value head per query head)")
    if config.head_size * config.n_heads != config.d_model:
        out.append(f"model.head_dim={config.head_dim} (expected null or d_model / n_heads)")
    return out


def decoder_needs(config: ModelConfig, **wanted: Any) -> list[str]:
    return inexpressible(config) + needs(
        config,
        family="decoder",
        norm_placement="pre",
        final_norm=True,
        embedding_norm=False,
        attention_scale=None,
        n_segments=0,
        head_transform=False,
        head_bias=False,
        **wanted,
    )


def untied_head(state: State, config: ModelConfig, name: str = "lm_head.weight") -> State:
    return {} if config.tie_embeddings else {name: state["head.proj.weight"]}
