"""Where the teacher comes from: one entry per `distill.teacher` kind, each giving a frozen model.

pretrained   artifacts/pretrain/<backbone>/best.ckpt, read with weights_only=True, weights loaded
             strictly; its pretraining objective's hyperparameters come along (the task to distil on)
hf           a Hugging Face-format folder or a pinned packaged model (`lmforge.hf.load_pretrained`)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from lmforge.distill.config import DistillConfig
from lmforge.model.config import ModelConfig
from lmforge.training.checkpoints import load_module
from lmforge.training.config import ObjectiveConfig


@dataclass
class Teacher:
    model: nn.Module  # in eval mode, no parameter requires a gradient
    config: ModelConfig
    objective: ObjectiveConfig | None  # the objective it was pretrained with; None for hf folders
    objective_state: dict[str, Any] | None  # the objective's own weights (BERT's NSP head); None for hf
    source: str  # where it came from, for the report


def pretrained(cfg: DistillConfig) -> Teacher:
    path = Path(cfg.checkpoint_dir) / cfg.backbone / "best.ckpt"
    module = load_module(path)  # the PretrainModule it was saved from: weights_only, strict
    state = module.objective.state_dict()
    return Teacher(
        frozen(module.model), module.model_config, module.objective_config, state, f"pretrain@{path}"
    )


def hf(cfg: DistillConfig) -> Teacher:
    from lmforge.hf.load import load_pretrained
    from lmforge.hf.packages import model_folder

    folder = model_folder(cfg.hf_source or "", cfg.hf_cache, "distill.teacher")
    loaded = load_pretrained(folder)
    return Teacher(frozen(loaded.model), loaded.config, None, None, f"hf:{folder}")


def frozen(model: nn.Module) -> nn.Module:
    """The model in eval mode with no parameter requiring a gradient."""
    return model.eval().requires_grad_(False)


TEACHERS: dict[str, Callable[[DistillConfig], Teacher]] = {"pretrained": pretrained, "hf": hf}


def load_teacher(cfg: DistillConfig) -> Teacher:
    return TEACHERS[cfg.teacher.split(":", 1)[0]](cfg)
