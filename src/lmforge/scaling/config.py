"""Structured config of the `scaling` group: the grid of a sweep, how each cell trains, and the fit.

Sizes follow one documented shape rule unless given explicitly: a size is a depth `n_layers`, and
d_model = aspect x n_layers (fixed aspect ratio d_model / n_layers, as in Kaplan et al. 2020 who
found the loss nearly flat over wide aspect ratios), n_heads = d_model / head_dim, d_ff = ffn_ratio
x d_model. A size may instead be a mapping {n_layers, d_model, n_heads, d_ff} (any omitted key
follows the rule). Every other architecture knob comes from the `model` group, the objective from
`objective`, so `model.position=rope` sweeps RoPE models with the same shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lmforge.errors import ConfigError
from lmforge.stage import Plan, read
from lmforge.structured import Group


class ParamCount(str, Enum):
    """Which N the law is fitted in."""

    non_embedding = "non_embedding"  # Kaplan et al.: without token / position tables
    total = "total"  # every parameter, tied ones once


@dataclass(frozen=True)
class ShapeRule:
    aspect: int = 16  # d_model per layer
    head_dim: int = 16  # d_model / n_heads
    ffn_ratio: int = 4  # d_ff / d_model


@dataclass(frozen=True)
class IsoFlopSlice:
    flops: float = 0.0  # the compute budget C of the slice (training FLOPs counted from the shapes)
    sizes: list[Any] = field(
        default_factory=list
    )  # sizes trained to exactly C (tokens = C / FLOPs per token)


@dataclass(frozen=True)
class LrRule:
    """The peak learning rate of a cell: optim.lr x (reference_d_model / d_model)^exponent.

    exponent 0 gives every size optim.lr; 1 is the mu-P-like rule lr ~ 1/width (Porian et al. 2024
    trace part of the Kaplan-Chinchilla disagreement to one rate for every size).
    """

    reference_d_model: int = 64  # the width that trains at optim.lr
    exponent: float = 0.0


@dataclass(frozen=True)
class SeedRepeats:
    """Cells trained again under other seeds, to measure the seed noise of the loss."""

    cells: list[str] = field(default_factory=list)  # cell names of the grid, e.g. L2-d32-D1.02M
    seeds: list[int] = field(default_factory=list)  # seeds besides the run's own `seed`


@dataclass(frozen=True)
class FitConfig:
    params: ParamCount = ParamCount.non_embedding  # N of the law
    huber_delta: float = 1.0e-3  # Hoffmann et al.'s delta on log-loss residuals
    n_boot: int = 200  # bootstrap resamples of the cells (law) and of the residuals (IsoFLOP)
    level: float = 0.95  # confidence level of every interval
    holdout_fraction: float = 0.15  # the largest-compute share of cells held out to test extrapolation
    seed: int = 0  # seeds the bootstrap


@dataclass(frozen=True)
class ScalingConfig:
    name: str = "default"  # names the sweep: reports/scaling/<name>/ and the MLflow parent run
    sizes: list[Any] = field(default_factory=list)  # the grid's sizes: n_layers (shape rule) or mappings
    tokens: list[int] = field(default_factory=list)  # the grid's token budgets D, crossed with sizes
    isoflop: list[IsoFlopSlice] = field(default_factory=list)  # IsoFLOP slices, cells added to the grid
    shape: ShapeRule = field(default_factory=ShapeRule)
    batch_size: int = 16  # sequences per optimizer step
    seq_len: int = 64  # tokens per sequence; D is counted in these tokens
    min_steps: int = 1000  # every cell trains at least this many optimizer steps (or the config is refused)
    lr: LrRule = field(default_factory=LrRule)  # per-size peak rate; warmup is optim.warmup_steps, fixed
    repeats: SeedRepeats = field(default_factory=SeedRepeats)
    plateau_margin: float = 0.1  # nats: a cell whose loss is within this of the unigram loss has not learned
    eval_tokens: int = 65536  # the fixed held-out set: the first tokens of the validation split
    eval_batch_size: int = 64  # sequences per evaluation batch
    allow_repetition: bool = False  # let a cell's D exceed the corpus's unique training tokens
    checkpoint_every: int = 200  # last.ckpt every N steps inside a cell: a kill loses at most N steps
    store: str = ".lmforge/scaling"  # content-addressed cell results (shared by sweeps, shards, queues)
    shards: int = 1  # split the cells over this many jobs (Hydra launcher / dvc queue) ...
    shard: int = 0  # ... and run this one: the cells whose index % shards == shard
    job: str = "default"  # names this job's MLflow run and lock (conf: <name>-<shard>of<shards>)
    reports_dir: str = "reports/scaling/default"
    against: str | None = None  # scaling_compare: the other sweep's name (its reports beside this one's)
    fit: FitConfig = field(default_factory=FitConfig)

    def __post_init__(self) -> None:
        if not self.sizes and not self.isoflop:
            raise ConfigError("scaling.sizes and scaling.isoflop are both empty; expected a grid to sweep")
        if self.sizes and not self.tokens:
            raise ConfigError("scaling.tokens is empty; expected the token budgets D to cross with sizes")
        for d in self.tokens:
            if d < 1:
                raise ConfigError(f"scaling.tokens: got {d}, expected token budgets >= 1")
        for i, piece in enumerate(self.isoflop):
            if piece.flops <= 0 or len(piece.sizes) < 3:
                raise ConfigError(
                    f"scaling.isoflop[{i}]: got flops={piece.flops:g} with {len(piece.sizes)} sizes, "
                    "expected flops > 0 and at least 3 sizes (a parabola needs 3)"
                )
        for key in ("batch_size", "seq_len", "eval_tokens", "eval_batch_size", "checkpoint_every", "shards"):
            if getattr(self, key) < 1:
                raise ConfigError(f"scaling.{key}: got {getattr(self, key)}, expected an integer >= 1")
        for key in ("aspect", "head_dim", "ffn_ratio"):
            if getattr(self.shape, key) < 1:
                raise ConfigError(f"scaling.shape.{key}: got {getattr(self.shape, key)}, expected >= 1")
        if not 0 <= self.shard < self.shards:
            raise ConfigError(f"scaling.shard: got {self.shard}, expected 0 <= shard < shards={self.shards}")
        if self.min_steps < 0:
            raise ConfigError(f"scaling.min_steps: got {self.min_steps}, expected an integer >= 0")
        if self.lr.reference_d_model < 1:
            raise ConfigError(
                f"scaling.lr.reference_d_model: got {self.lr.reference_d_model}, expected a width >= 1"
            )
        if not self.plateau_margin >= 0:
            raise ConfigError(f"scaling.plateau_margin: got {self.plateau_margin}, expected nats >= 0")
        if self.repeats.seeds and not self.repeats.cells:
            raise ConfigError("scaling.repeats.seeds is set but repeats.cells is empty; expected cell names")
        if not 0.0 < self.fit.level < 1.0 or self.fit.n_boot < 10:
            raise ConfigError(
                f"scaling.fit: got level={self.fit.level}, n_boot={self.fit.n_boot}; "
                "expected 0 < level < 1 and n_boot >= 10"
            )
        if not 0.0 < self.fit.holdout_fraction < 0.5:
            raise ConfigError(
                f"scaling.fit.holdout_fraction: got {self.fit.holdout_fraction}, expected in (0, 0.5)"
            )


scaling_config = Group(ScalingConfig, "scaling")


@dataclass(frozen=True, kw_only=True, eq=False)
class ScalingPlan(Plan):
    """What the stages that read the scaling sweep's results read (fit, compare, plots)."""

    scaling: ScalingConfig = read(scaling_config)
