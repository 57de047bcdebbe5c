"""Load a Hugging Face-format model folder (config.json + safetensors or a torch state dict + tokenizer)
into our `build_model`, so fine-tuning and distillation can start from weights trained elsewhere.

The folder's `model_type` picks one `Architecture` (`lmforge.hf.architectures`); its config becomes a
validated `ModelConfig`, every tensor is renamed onto our parameter names, and the load is strict:
a tensor our model has no place for, a parameter the folder does not provide, or a shape that differs
is one `DataError` line naming the folder and the tensor. Weights are read with safetensors, or with
`torch.load(weights_only=True)` for `pytorch_model.bin`, so no file can run code when loaded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import nn

from lmforge.errors import ConfigError, DataError
from lmforge.hf.architectures import ARCHITECTURES, Architecture
from lmforge.model import build_model
from lmforge.model.config import ModelConfig, load_model_config

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


@dataclass
class Pretrained:
    model: nn.Module  # our model, in eval mode, with the folder's weights
    config: ModelConfig
    tokenizer_file: Path | None  # the folder's tokenizer.json, if it has one
    extra: dict[str, torch.Tensor]  # folder tensors our model has no place for (BERT's pooler, ...)


def load_pretrained(folder: str | Path, **overrides: Any) -> Pretrained:
    """Our model with the weights of the HF folder; `overrides` set ModelConfig fields (e.g. dropout)."""
    folder = Path(folder)
    hf = read_config(folder)
    arch = architecture(folder, hf)
    state = arch.convert(strip_prefixes(read_weights(folder), arch.prefixes), hf)
    try:
        config = load_model_config({**arch.config(hf, set(state)), **overrides})
    except (ConfigError, DataError) as err:  # a value ModelConfig refuses, or a setting it cannot express
        raise DataError(f"hf folder {folder}: {err}") from None
    mapped, extra = rename(state, arch, folder)
    model = build_model(config)
    load_strict(model, mapped, folder)
    tokenizer = folder / "tokenizer.json"
    return Pretrained(model.eval(), config, tokenizer if tokenizer.is_file() else None, extra)


def read_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise DataError(f"hf folder {folder}: no config.json; expected a Hugging Face-format model folder")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"hf folder {folder}: config.json is not valid JSON ({err})") from None


def architecture(folder: Path, hf: dict[str, Any]) -> Architecture:
    kind = hf.get("model_type")
    if kind not in ARCHITECTURES:
        raise DataError(
            f"hf folder {folder}: model_type {kind!r} cannot be expressed by ModelConfig; expected one of "
            f"{', '.join(sorted(ARCHITECTURES))}"
        )
    return ARCHITECTURES[kind]


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of the folder, from whichever weight file it has (sharded safetensors included)."""
    present = [name for name in WEIGHT_FILES if (folder / name).is_file()]
    if not present:
        raise DataError(f"hf folder {folder}: no weights; expected one of {', '.join(WEIGHT_FILES)}")
    path = folder / present[0]
    try:
        if path.name.endswith(".index.json"):
            shards = sorted(set(json.loads(path.read_text())["weight_map"].values()))
            return {k: v for shard in shards for k, v in _safetensors(folder / shard).items()}
        if path.suffix == ".safetensors":
            return _safetensors(path)
        state = torch.load(path, map_location="cpu", weights_only=True)
    except DataError:
        raise
    except Exception as err:  # truncated, foreign or hostile bytes
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"hf folder {folder}: {path.name} is unreadable ({first})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise DataError(f"hf folder {folder}: {path.name} is not a state dict of tensors")
    return state


def _safetensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise DataError(f"hf folder {path.parent}: shard {path.name} is missing")
    return load_file(path)


def strip_prefixes(state: dict[str, torch.Tensor], prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """`bert.encoder...` -> `encoder...`: heads-included and bare checkpoints name tensors alike."""
    out = {}
    for name, tensor in state.items():
        for prefix in prefixes:
            name = name.removeprefix(prefix)
        out[name] = tensor
    return out


def rename(state: dict[str, torch.Tensor], arch: Architecture, folder: Path) -> tuple[dict, dict]:
    """(tensors under our names, tensors kept aside); a name no rule matches is an error."""
    mapped, extra = {}, {}
    for name, tensor in state.items():
        for pattern, target in arch.rules:
            match = re.fullmatch(pattern, name)
            if match:
                if target is None:
                    extra[name] = tensor
                else:
                    mapped[match.expand(target) if isinstance(target, str) else target(match)] = tensor
                break
        else:
            raise DataError(
                f"hf folder {folder}: tensor {name!r} has no place in a ModelConfig model; expected the "
                "tensor names of a standard checkpoint of its model_type"
            )
    return mapped, extra


def load_strict(model: nn.Module, mapped: dict[str, torch.Tensor], folder: Path) -> None:
    """Every parameter from the folder, shapes equal; tied matrices are filled from their source."""
    own = model.state_dict()
    for name, source in _aliases(model).items():
        if name in mapped and source in mapped and not torch.equal(mapped[name], mapped[source]):
            raise DataError(
                f"hf folder {folder}: {name} and {source} differ, but its config ties them; expected "
                "tie_word_embeddings=false for separate matrices"
            )
        if source in mapped:
            mapped[name] = mapped[source]
    missing = sorted(set(own) - set(mapped))
    unknown = sorted(set(mapped) - set(own))
    if missing or unknown:
        what = f"lacks {missing[0]}" if missing else f"has {unknown[0]}, which the configured model lacks"
        raise DataError(f"hf folder {folder}: the weights do not fit the model its config describes ({what})")
    for name, tensor in mapped.items():
        if tensor.shape != own[name].shape:
            raise DataError(
                f"hf folder {folder}: {name} has shape {tuple(tensor.shape)}, expected {tuple(own[name].shape)}"
            )
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in mapped.items()}, strict=True)


def _aliases(model: nn.Module) -> dict[str, str]:
    """State-dict names that share storage with an earlier name (tied embeddings): alias -> first name."""
    first: dict[int, str] = {}
    aliases = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        key = id(tensor)
        if key in first:
            aliases[name] = first[key]
        else:
            first[key] = name
    return aliases
