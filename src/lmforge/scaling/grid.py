"""The cells of a sweep: sizes x token budgets, plus IsoFLOP slices, each with its exact compute.

A cell is one model shape trained for one token budget D, under one seed, with a fixed warmup (the
optim group's `warmup_steps`) and a cosine schedule that ends where the cell ends, at the peak rate
of its width (`scaling.lr`). Every cell trains at least `scaling.min_steps` optimizer steps: a
config whose smallest budget is fewer steps is refused, naming the cell. D is counted in training
tokens (steps x batch_size x seq_len), rounded down to whole steps. Compute C is counted from the
model's shapes (`lmforge.model.flops`: every projection, the attention products and the vocabulary
head, forward + backward) and logged beside the 6ND
approximation (with N total and N non-embedding). An IsoFLOP cell gets the D that spends its slice's
budget C exactly on its shape. A cell's key is the sha256 of everything its result depends on (its
resolved model, objective, optimizer, batching, seed, evaluation set, the data and the training
code), so a finished cell is reused by any sweep, shard or queued experiment that asks for it again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.codebase import module_code
from lmforge.errors import ConfigError, DataError
from lmforge.io import sha256_files
from lmforge.model import build_model, count_parameters
from lmforge.model.config import Family, ModelConfig
from lmforge.model.flops import training_flops
from lmforge.scaling.config import ScalingConfig
from lmforge.training.config import ObjectiveConfig, ObjectiveKind

SHAPE_KEYS = ("n_layers", "d_model", "n_heads", "d_ff")


@dataclass(frozen=True)
class Cell:
    index: int  # position in the sweep (shards take index % shards)
    name: str  # e.g. L3-d48-D200k
    kind: str  # grid | isoflop
    model: ModelConfig  # the cell's model
    steps: int
    tokens: int  # D = steps x batch_size x seq_len
    budget: float | None  # the IsoFLOP slice's C; None for a grid cell
    flops: int  # training FLOPs of the whole cell, counted from the shapes
    params_total: int
    params_non_embedding: int
    lr: float  # peak learning rate (scaling.lr's rule at this width)
    seed: int  # the run's seed, or one of scaling.repeats.seeds for a repeat
    key: str = ""  # content address (set by `keyed`)

    @property
    def flops_6nd(self) -> float:
        return 6.0 * self.params_total * self.tokens

    @property
    def flops_6nd_non_embedding(self) -> float:
        return 6.0 * self.params_non_embedding * self.tokens

    def describe(self) -> dict[str, Any]:
        """Flat numbers of the cell (the MLflow params and the results table's left columns)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "budget": self.budget if self.budget is not None else float("nan"),
            **{k: getattr(self.model, k) for k in SHAPE_KEYS},
            "params_total": self.params_total,
            "params_non_embedding": self.params_non_embedding,
            "tokens": self.tokens,
            "steps": self.steps,
            "flops": self.flops,
            "flops_6nd": self.flops_6nd,
            "flops_6nd_non_embedding": self.flops_6nd_non_embedding,
            "lr": self.lr,
            "seed": self.seed,
            "key": self.key,
        }


def shape_of(size: Any, cfg: ScalingConfig, where: str) -> dict[str, int]:
    """A size of the config -> {n_layers, d_model, n_heads, d_ff} by the shape rule (config docstring)."""
    if isinstance(size, int) and not isinstance(size, bool):
        size = {"n_layers": size}
    if not isinstance(size, dict) or "n_layers" not in size or set(size) - set(SHAPE_KEYS):
        raise ConfigError(
            f"{where}: got {size!r}, expected a depth n_layers (an integer) or a mapping with "
            f"n_layers and optionally {', '.join(SHAPE_KEYS[1:])}"
        )
    rule = cfg.shape
    d_model = size.get("d_model", rule.aspect * size["n_layers"])
    shape = {
        "n_layers": size["n_layers"],
        "d_model": d_model,
        "n_heads": size.get("n_heads", max(1, d_model // rule.head_dim)),
        "d_ff": size.get("d_ff", rule.ffn_ratio * d_model),
    }
    for key, value in shape.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{where}: {key}={value!r}, expected a positive integer")
    return shape


def _model(base: ModelConfig, shape: dict[str, int], seq_len: int, where: str) -> ModelConfig:
    try:
        return dataclasses.replace(
            base, **shape, head_dim=None, n_encoder_layers=None, max_seq_len=max(base.max_seq_len, seq_len)
        )
    except ConfigError as err:
        raise ConfigError(f"{where} (shape {shape}) cannot be built: {err}") from None


def tokens_per_step(cfg: ScalingConfig) -> int:
    return cfg.batch_size * cfg.seq_len


def step_flops(config: ModelConfig, objective: ObjectiveConfig, cfg: ScalingConfig) -> int:
    """Training FLOPs of one optimizer step of the model under the objective."""
    if config.family is Family.encoder_decoder:
        raise ConfigError(
            "scaling: model.family=encoder_decoder is not supported by the sweep (its token budget "
            "and FLOPs depend on the corruption); expected a decoder or encoder model"
        )
    projected = None
    if objective.kind is ObjectiveKind.mlm:  # the head projects the selected positions only
        projected = round(objective.mlm_probability * cfg.batch_size * cfg.seq_len)
    return training_flops(config, cfg.batch_size, cfg.seq_len, projected=projected)


def _parameters(model: ModelConfig) -> dict[str, int]:
    return count_parameters(build_model(model))


def _label(tokens: int) -> str:
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if tokens >= scale:
            return f"{tokens / scale:.3g}{unit}"
    return str(tokens)


def peak_lr(cfg: ScalingConfig, base_lr: float, d_model: int) -> float:
    """scaling.lr's rule: base_lr x (reference_d_model / d_model)^exponent."""
    return float(base_lr * (cfg.lr.reference_d_model / d_model) ** cfg.lr.exponent)


def cells(
    cfg: ScalingConfig, base_model: ModelConfig, objective: ObjectiveConfig, base_lr: float, seed: int
) -> list[Cell]:
    """Every cell of the sweep in a fixed order: the grid (sizes x tokens), then each IsoFLOP slice,
    then the seed repeats. A cell that appears twice (same shape and steps) is trained once."""
    per_step = tokens_per_step(cfg)
    planned: list[tuple[str, dict[str, int], int, float | None, str]] = []
    for i, size in enumerate(cfg.sizes):
        shape = shape_of(size, cfg, f"scaling.sizes[{i}]")
        for d in cfg.tokens:
            planned.append(("grid", shape, max(1, d // per_step), None, f"scaling.sizes[{i}]"))
    for j, piece in enumerate(cfg.isoflop):
        for i, size in enumerate(piece.sizes):
            where = f"scaling.isoflop[{j}].sizes[{i}]"
            shape = shape_of(size, cfg, where)
            model = _model(base_model, shape, cfg.seq_len, where)
            steps = round(piece.flops / step_flops(model, objective, cfg))
            if steps < 1:
                raise ConfigError(
                    f"{where}: budget {piece.flops:g} FLOPs is less than one step of this shape; "
                    "expected a larger scaling.isoflop flops"
                )
            planned.append(("isoflop", shape, steps, float(piece.flops), where))
    for _, shape, steps, _, where in planned:
        if steps < cfg.min_steps:
            name = f"L{shape['n_layers']}-d{shape['d_model']}-D{_label(steps * per_step)}"
            raise ConfigError(
                f"{where}: cell {name} trains {steps} steps; expected at least scaling.min_steps="
                f"{cfg.min_steps} (raise its token budget or flops, or lower scaling.batch_size x seq_len)"
            )
    out: list[Cell] = []
    seen: dict[tuple, int] = {}
    for kind, shape, steps, budget, where in planned:
        ident = (tuple(shape.values()), steps)
        if ident in seen:
            if budget is not None:  # a grid cell that also lies on a slice: it belongs to both
                out[seen[ident]] = dataclasses.replace(out[seen[ident]], budget=budget)
            continue
        model = _model(base_model, shape, cfg.seq_len, where)
        params = _parameters(model)
        tokens = steps * per_step
        seen[ident] = len(out)
        out.append(
            Cell(
                index=len(out),
                name=f"L{shape['n_layers']}-d{shape['d_model']}-D{_label(tokens)}",
                kind=kind,
                model=model,
                steps=steps,
                tokens=tokens,
                budget=budget,
                flops=steps * step_flops(model, objective, cfg),
                params_total=params["total"],
                params_non_embedding=params["non_embedding"],
                lr=peak_lr(cfg, base_lr, shape["d_model"]),
                seed=seed,
            )
        )
    return out + repeats(out, cfg)


def repeats(grid: list[Cell], cfg: ScalingConfig) -> list[Cell]:
    """The cells named in scaling.repeats.cells again under each of its seeds (same name, new seed)."""
    by_name = {c.name: c for c in grid}
    unknown = [n for n in cfg.repeats.cells if n not in by_name]
    if unknown:
        raise ConfigError(
            f"scaling.repeats.cells: got {unknown}, expected names of the sweep's cells: {', '.join(by_name)}"
        )
    out = []
    for name in cfg.repeats.cells:
        for seed in cfg.repeats.seeds:
            if seed != by_name[name].seed:
                out.append(dataclasses.replace(by_name[name], index=len(grid) + len(out), seed=seed))
    return out


def check_capacity(grid: list[Cell], unique_tokens: int, cfg: ScalingConfig, encoded: Path) -> None:
    """One line when a cell would repeat data that the config does not allow it to repeat."""
    if cfg.allow_repetition:
        return
    largest = max(grid, key=lambda c: c.tokens)
    if largest.tokens > unique_tokens:
        raise DataError(
            f"scaling cell {largest.name}: D={largest.tokens:,} tokens exceeds the {unique_tokens:,} "
            f"unique training tokens of {encoded}; expected D <= {unique_tokens:,}, a larger corpus, "
            "or scaling.allow_repetition=true"
        )


# The module that trains a cell: a change to any file it imports gives new keys, so no stale result is reused.
CELL_MODULE = "lmforge.scaling.cell"


def code_fingerprint() -> str:
    """sha256 of the code a cell runs with (`lmforge.codebase`: what `CELL_MODULE` imports)."""
    return sha256_files(module_code(CELL_MODULE))


def keyed(grid: list[Cell], context: dict[str, Any]) -> list[Cell]:
    """Each cell with its content address: sha256 of the cell and the shared `context` (objective,
    optimizer, batching, seed, evaluation set, data and code fingerprints)."""
    out = []
    for cell in grid:
        values = {
            "model": cell.model.to_dict(),
            "steps": cell.steps,
            "lr": cell.lr,
            "seed": cell.seed,
            **context,
        }
        digest = hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()
        out.append(dataclasses.replace(cell, key=digest[:20]))
    return out
