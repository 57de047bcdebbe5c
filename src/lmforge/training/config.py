"""Structured configs of the `objective`, `optim` groups and the top-level `train` section.

Merged onto these dataclasses when a stage starts, so a wrong type or range fails at once with a
one-line ConfigError naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lmforge.errors import ConfigError
from lmforge.structured import validate


class ObjectiveKind(str, Enum):
    clm = "clm"  # GPT next-token prediction on packed blocks
    mlm = "mlm"  # BERT / RoBERTa masked language modelling (+ optional NSP)
    span_corruption = "span_corruption"  # T5 denoising of dropped spans


@dataclass
class ObjectiveConfig:
    name: str = "clm"  # label used in run names
    kind: ObjectiveKind = ObjectiveKind.clm
    nsp: bool = False  # mlm: add next-sentence prediction on [CLS] A [SEP] B [SEP] pairs (BERT)
    dynamic_masking: bool = True  # mlm: fresh masks each visit (RoBERTa) or fixed per example (BERT)
    mlm_probability: float = 0.15  # mlm: share of tokens selected for prediction
    noise_density: float = 0.15  # span_corruption: share of tokens dropped
    mean_span_length: float = 3.0  # span_corruption: mean length of a dropped span
    label_smoothing: float = 0.0  # Szegedy et al. 2016; 0.1 in the 2017 Transformer

    def __post_init__(self) -> None:
        for key in ("mlm_probability", "noise_density"):
            if not 0.0 < getattr(self, key) < 1.0:
                raise ConfigError(f"objective.{key}: got {getattr(self, key)}, expected a value in (0, 1)")
        if self.nsp and self.kind is not ObjectiveKind.mlm:
            raise ConfigError(
                f"objective.nsp: got true for kind={self.kind.value}, expected it only with mlm"
            )


@dataclass
class OptimConfig:
    name: str = "adamw"
    lr: float = 1e-3  # peak learning rate (noam: a factor on the paper's rate)
    weight_decay: float = 0.1  # AdamW decay on matrices only
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1e-8
    schedule: str = "cosine"  # noam | linear | cosine | constant
    warmup_steps: int = 100
    min_lr_ratio: float | None = None  # linear / cosine floor as a share of lr; None -> schedule default


@dataclass
class TrainConfig:
    batch_size: int = 32  # sequences per optimizer step and device (before accumulation)
    seq_len: int = 128  # tokens per sequence (encoder input length for span corruption)
    num_workers: int = 0  # DataLoader worker processes
    out_dir: str = "artifacts/pretrain/run"  # checkpoints (best.ckpt, last.ckpt)
    reports_dir: str = "reports/pretrain/run"  # curves and summary metrics for DVC
    resume: bool = False  # continue from {out_dir}/last.ckpt (weights, optimizer, step) if present

    def __post_init__(self) -> None:
        for key in ("batch_size", "seq_len"):
            if getattr(self, key) < 1:
                raise ConfigError(f"train.{key}: got {getattr(self, key)}, expected an integer >= 1")
        if self.num_workers < 0:
            raise ConfigError(f"train.num_workers: got {self.num_workers}, expected an integer >= 0")


def objective_config(node: Any) -> ObjectiveConfig:
    return validate(ObjectiveConfig, node, "objective")


def optim_config(node: Any) -> OptimConfig:
    return validate(OptimConfig, node, "optim")


def train_config(node: Any) -> TrainConfig:
    return validate(TrainConfig, node, "train")
