"""The `distill` stage: a student trained on a teacher's soft targets over the pretraining corpus.

The teacher (`distill.teacher`: our pretrain checkpoint, or an hf: folder) fixes the student's
architecture (its config with `student_layers` layers and `distill.student`'s overrides), the
objective (the one it was pretrained with) and the tokenizer (the configured one must match its
vocabulary). Training is the pretrain stage's (`lmforge.training.pretrain.fit`): the same data
order, checkpoints, exact resume, curves and metrics, written to `distill.out_dir` and
`distill.reports_dir`; the fingerprint that guards resume includes the teacher's files.

`distill.init=random` with alpha_ce = alpha_cos = 0 is the control: the student's architecture
trained from scratch on the same tokens with the plain objective (the teacher's pass is skipped).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from lmforge.backbones import Backbone, Where, files, load_backbone
from lmforge.distill.config import DistillConfig, StudentInit, distill_config, layer_map_for
from lmforge.distill.module import DistillModule
from lmforge.distill.student import init_student, student_config
from lmforge.errors import ConfigError, DataError
from lmforge.io import write_json
from lmforge.model import count_parameters
from lmforge.stage import StageResult, read, run_name_value
from lmforge.training.config import TrainConfig
from lmforge.training.pretrain import (
    TrainingPlan,
    fingerprint,
    fit,
    prepare_run,
    resume_from,
    tokenizer_paths,
)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class DistillPlan(TrainingPlan):
    """The `distill` stage's plan: the teacher and the student's shape in `distill`; `objective` is
    used only by a teacher without one (an hf: folder)."""

    distill: DistillConfig = read(distill_config)
    run_name: str = read(run_name_value)


def teacher_source(cfg: DistillConfig) -> Where:
    """The teacher: one of our pretrain runs or an hf: folder (`lmforge.backbones`)."""
    return Where(cfg.teacher, cfg.models_dir, cfg.backbone, hf_cache=cfg.hf_cache, key="distill.teacher")


def load_teacher(cfg: DistillConfig) -> Backbone:
    """The teacher, frozen: in eval mode, no parameter requiring a gradient."""
    teacher = load_backbone(teacher_source(cfg))
    teacher.model.eval().requires_grad_(False)
    return teacher


def stamp(plan: DistillPlan) -> str:
    """The student's fingerprint covers the teacher's files too."""
    return fingerprint(plan, *tokenizer_paths(plan.tokenizer), *files(teacher_source(plan.distill)))


def will_resume(plan: DistillPlan) -> bool:
    """Whether `run(plan)` continues an interrupted distillation (MLflow then continues its run too); a
    refused resume (`train.resume=true` over another config) raises here, at the door."""
    try:
        stamp_text = stamp(plan)
    except (ConfigError, DataError, OSError):
        return False  # run() reports the problem
    return not resume_from(student_train(plan), Path(plan.distill.out_dir), stamp_text).fresh


def folders(plan: DistillPlan) -> list[str]:
    """The student's output folder, written by this run alone (locked by `execute`)."""
    return [plan.distill.out_dir]


def student_train(plan: DistillPlan) -> TrainConfig:
    """The `train` group with the student's own output folders."""
    distill = plan.distill
    return dataclasses.replace(plan.train, out_dir=distill.out_dir, reports_dir=distill.reports_dir)


def run(plan: DistillPlan) -> StageResult:
    distill = plan.distill
    teacher = load_teacher(distill)
    student = student_config(teacher.config, distill)
    objective = teacher.objective if teacher.objective is not None else plan.objective
    job = prepare_run(plan, student, objective, student_train(plan), built=True)
    layer_map = layer_map_for(distill, teacher.config.n_layers)

    def build() -> DistillModule:
        module = DistillModule(job.model, job.objective, job.optim, job.trainer.max_steps)
        if distill.init is StudentInit.teacher:
            init_student(module.model, teacher.model, layer_map)
            if teacher.objective_state is not None:  # the objective's own heads (BERT's NSP)
                module.objective.load_state_dict(teacher.objective_state)
        if distill.alpha_ce or distill.alpha_cos:
            module.distil_from(teacher.model, distill)
        return module

    result = fit(job, stamp(plan), build)
    run_json = Path(distill.reports_dir) / "run.json"
    write_json(run_json, describe(distill, teacher, layer_map))
    return result._replace(artifacts=[*result.artifacts, str(run_json)])


def describe(cfg: DistillConfig, teacher: Backbone, layer_map: list[int]) -> dict[str, Any]:
    """What the student is and where it came from, for the summary."""
    distils = bool(cfg.alpha_ce or cfg.alpha_cos)
    return {
        "teacher": teacher.source,
        "teacher_layers": teacher.config.n_layers,
        "teacher_params": count_parameters(teacher.model)["total"],
        "student_layers": len(layer_map),
        "init": cfg.init.value,
        "layer_map": layer_map if cfg.init is StudentInit.teacher else None,
        "loss": (
            f"{cfg.alpha_ce}*KL(T={cfg.temperature}) + {cfg.alpha_task}*task + {cfg.alpha_cos}*cos"
            if distils
            else f"{cfg.alpha_task}*task (no teacher term)"
        ),
    }
