"""Validate a yaml config group against its structured dataclass schema.

Each stage merges its config groups onto dataclass schemas when it starts, so a wrong type, an
unknown key or an out-of-range value fails at once with a one-line `ConfigError` instead of deep
inside a run.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lmforge.errors import ConfigError

T = TypeVar("T")
E = TypeVar("E", bound=Enum)


def validate(schema: type[T], node: Any, group: str) -> T:
    """Merge `node` (a DictConfig or dict) onto the dataclass `schema`; return the dataclass instance.

    Any OmegaConf complaint (unknown key, wrong type, bad enum value) becomes a one-line ConfigError
    that names the config group.
    """
    try:
        if OmegaConf.is_config(node):  # resolve interpolations against the full config first
            node = OmegaConf.to_container(node, resolve=True)
        merged = OmegaConf.merge(OmegaConf.structured(schema), node if node is not None else {})
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as err:
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        full_key = getattr(err, "full_key", None)
        where = f"{group}.{full_key}" if full_key else group
        raise ConfigError(f"invalid config {where}: {first_line}") from None


def enum_value(enum: type[E], value: Any, key: str) -> E:
    """`value` as a member of `enum` (a member, or its value as yaml writes it), or one line naming
    the key and the values allowed."""
    if isinstance(value, enum):
        return value
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in enum)
        raise ConfigError(f"{key}: got {value!r}, expected one of: {allowed}") from None


def plain(value: Any) -> Any:
    """A validated config back to plain values: dataclasses to dicts, Enums to their values, tuples
    to lists, recursively; what checkpoints, MLflow and JSON store and `validate` reads back."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
