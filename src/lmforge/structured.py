"""Validate a yaml config group against its structured dataclass schema.

Each stage merges its config groups onto dataclass schemas when it starts, so a wrong type, an
unknown key or an out-of-range value fails at once with a one-line `ConfigError` instead of deep
inside a run. A group's defaults live in its dataclass alone: `conf/<group>/base.yaml` is written
from them (`python -m scripts.conf_bases`), each preset lists `base` first and only what it changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import Enum
from typing import Any, Generic, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lmforge.errors import ConfigError

T = TypeVar("T")
E = TypeVar("E", bound=Enum)


def validate(schema: type[T], node: Any, group: str) -> T:
    """Merge `node` (a DictConfig or dict) onto the dataclass `schema`; return the dataclass instance.

    Any OmegaConf complaint (unknown key, wrong type, bad enum value) becomes a one-line ConfigError
    that names the config group, as does a check of a nested dataclass (`finetune: optim.lr: ...`).
    """
    try:
        if OmegaConf.is_config(node):  # resolve interpolations against the full config first
            node = OmegaConf.to_container(node, resolve=True)
        merged = OmegaConf.merge(_writable(OmegaConf.structured(schema)), node if node is not None else {})
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except ConfigError as err:  # a nested group's own check (`finetune.optim`) names it from its own root
        if str(err).startswith(f"{group}."):
            raise
        raise ConfigError(f"{group}: {err}") from None
    except OmegaConfBaseException as err:
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        full_key = getattr(err, "full_key", None)
        where = f"{group}.{full_key}" if full_key else group
        raise ConfigError(f"invalid config {where}: {first_line}") from None


class Group(Generic[T]):
    """A config group's parser at the stage door: `Group(OptimConfig, "optim")(node)` is the validated
    dataclass. `parse` replaces the default merge (the model group's `load_model_config`); `label`
    is the base's `name` where the schema has no such field (the parse ignores it)."""

    def __init__(
        self, schema: type[T], name: str, parse: Callable[[Any], T] | None = None, label: str | None = None
    ) -> None:
        self.schema, self.name, self._parse, self.label = schema, name, parse, label

    def __call__(self, node: Any) -> T:
        return self._parse(node) if self._parse else validate(self.schema, node, self.name)

    def __repr__(self) -> str:
        return f"Group({self.schema.__name__}, {self.name!r})"


# The download cache of every fetching group: env LMFORGE_CACHE overrides it.
CACHE = "${oc.env:LMFORGE_CACHE,'~/.cache/lmforge'}"


def rooted(default: str, conf: str) -> Any:
    """A dataclass field for an output or cache path: `default` when the dataclass is built directly
    (tests, benchmarks), `conf` in the composed config, which hangs it from a conf/paths root
    (`${paths.data}/prepared`) or the environment (`CACHE`)."""
    return dataclasses.field(default=default, metadata={"conf": conf})


def defaults(schema: type) -> dict[str, Any]:
    """Every field of a dataclass schema at its default, as plain yaml values (a `rooted` path: its
    composed form; a required field: `???`, OmegaConf's missing value; a nested dataclass: its own
    defaults)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(schema):
        if "conf" in f.metadata:
            value: Any = f.metadata["conf"]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            factory = f.default_factory
            value = defaults(factory) if dataclasses.is_dataclass(factory) else factory()
        else:
            value = "???"
        out[f.name] = plain(value)
    return out


def _writable(node: Any) -> Any:
    """OmegaConf marks the nodes of a frozen dataclass read-only, so nothing could merge onto them;
    the config dataclasses are frozen for the code that receives them, not for their parsing."""
    OmegaConf.set_readonly(node, None)
    for key in node if OmegaConf.is_dict(node) else range(len(node)):
        child = node._get_node(key)
        if OmegaConf.is_config(child):
            _writable(child)
    return node


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
