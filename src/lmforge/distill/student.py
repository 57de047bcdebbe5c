"""The student: the teacher's architecture with fewer layers, initialised from the teacher's weights.

DistilBERT (Sanh et al. 2019, section 3) keeps the teacher's width, halves its depth and starts from
the teacher "by taking one layer out of two". Here the embeddings, the final norm and the output
head are copied as they are, and student layer i is teacher layer `layer_map[i]`, by renaming
state-dict keys:

    teacher  stack.layers.0.  stack.layers.1.  stack.layers.2.  stack.layers.3.
                   |                                |
    student  stack.layers.0.                  stack.layers.1.               layer_map = [0, 2]

Only single-stack models (encoder, decoder) are distilled; a width that differs from the teacher's
needs `init=random`, and the vocabulary never differs (the KL compares distributions over it).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import torch
from torch import nn

from lmforge.distill.config import DistillConfig, StudentInit, check_layer_map, layer_map_for
from lmforge.errors import ConfigError
from lmforge.model.config import Family, ModelConfig

LAYER_KEY = re.compile(r"(.*\blayers\.)(\d+)(\..+)")  # prefix, layer index, rest of the name
WIDTH = ("d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff")  # what init=teacher needs unchanged


def student_config(teacher: ModelConfig, cfg: DistillConfig) -> ModelConfig:
    """The teacher's config with the student's depth and `cfg.student`'s overrides, checked against it."""
    if teacher.family is Family.encoder_decoder:
        raise ConfigError(
            "distill.teacher: got family encoder_decoder, expected an encoder or a decoder (one stack)"
        )
    n_layers = len(layer_map_for(cfg, teacher.n_layers))
    try:  # the overrides' names were checked at the door (DistillConfig); their values are checked here
        student = dataclasses.replace(teacher, **cfg.student, n_layers=n_layers)
    except ConfigError as err:  # an override ModelConfig refuses
        raise ConfigError(f"distill.student: {err}") from None
    check_compatible(teacher, student, cfg.init)
    if cfg.alpha_cos and student.d_model != teacher.d_model:
        raise ConfigError(
            f"distill.alpha_cos: got {cfg.alpha_cos} with student width {student.d_model} and teacher width "
            f"{teacher.d_model}, expected 0 (the cosine compares hidden states of one width)"
        )
    return student


def check_compatible(teacher: ModelConfig, student: ModelConfig, init: StudentInit) -> None:
    """One line for a student of another vocabulary, or of another width when copied from the teacher."""
    if student.vocab_size != teacher.vocab_size:
        raise ConfigError(
            f"distill.student: got vocab_size={student.vocab_size}, expected the teacher's "
            f"{teacher.vocab_size} (the KL compares distributions over one vocabulary)"
        )
    if init is StudentInit.teacher:
        for key in WIDTH:
            if getattr(student, key) != getattr(teacher, key):
                raise ConfigError(
                    f"distill.student.{key}: got {getattr(student, key)}, expected the teacher's "
                    f"{getattr(teacher, key)} with init=teacher (set distill.init=random to change the width)"
                )


def init_student(student: nn.Module, teacher: nn.Module, layer_map: Sequence[int]) -> None:
    """Copy every teacher weight into the student, teacher layer `layer_map[i]` into student layer i.

    Strict: every student weight must be filled with a tensor of its shape, and every teacher weight
    outside the layers must have a place in the student; otherwise one ConfigError line naming it.
    """
    target = student.state_dict()
    source = teacher.state_dict()
    check_layer_map(list(layer_map), _depth(source), _depth(target))
    renamed = _renamed(source, list(layer_map))
    for key in sorted(set(target) | set(renamed)):
        if key not in renamed:
            raise ConfigError(f"distill.init: student weight {key} has no teacher weight, expected one")
        if key not in target:
            raise ConfigError(f"distill.init: teacher weight {key} has no place in the student, expected one")
        if renamed[key].shape != target[key].shape:
            raise ConfigError(
                f"distill.init: {key} is {tuple(target[key].shape)} in the student and "
                f"{tuple(renamed[key].shape)} in the teacher, expected equal shapes (or distill.init=random)"
            )
    student.load_state_dict(renamed, strict=True)


def _renamed(state: dict[str, torch.Tensor], layer_map: list[int]) -> dict[str, torch.Tensor]:
    """Teacher weights under student names: layers renamed by the map (the others dropped), the rest as is."""
    student_index = {j: i for i, j in enumerate(layer_map)}
    renamed = {}
    for key, value in state.items():
        match = LAYER_KEY.fullmatch(key)
        if match is None:
            renamed[key] = value
        elif int(match[2]) in student_index:
            renamed[f"{match[1]}{student_index[int(match[2])]}{match[3]}"] = value
    return renamed


def _depth(state: dict[str, torch.Tensor]) -> int:
    """Number of layers in a single-stack state dict (1 + the highest layer index)."""
    indices = [int(m[2]) for m in map(LAYER_KEY.fullmatch, state) if m is not None]
    return max(indices, default=-1) + 1
