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

from lmforge.distill.config import DistillConfig, StudentInit, distill_config, layer_map_for
from lmforge.distill.module import DistillModule
from lmforge.distill.student import init_student, student_config
from lmforge.distill.teacher import Teacher, load_teacher
from lmforge.errors import ConfigError, DataError
from lmforge.io import write_json
from lmforge.model import count_parameters
from lmforge.stage import StageResult
from lmforge.training.config import TrainConfig, objective_config, train_config
from lmforge.training.pretrain import fingerprint, fit, make_plan, plain, resume_from, tokenizer_paths


def teacher_files(cfg: DistillConfig) -> list[Path]:
    """The files the teacher is read from (part of the student's fingerprint)."""
    if cfg.hf_source is None:
        return [Path(cfg.checkpoint_dir) / cfg.backbone / "best.ckpt"]
    from lmforge.hf.packages import model_folder

    folder = model_folder(cfg.hf_source, cfg.hf_cache, "distill.teacher")
    return sorted(p for p in folder.iterdir() if p.is_file())


def stamp(cfg: Any, distill: DistillConfig) -> str:
    return fingerprint(cfg, *tokenizer_paths(cfg), *teacher_files(distill))


def will_resume(cfg: Any) -> bool:
    """Whether `run(cfg)` continues an interrupted distillation (MLflow then continues its run too); a
    refused resume (`train.resume=true` over another config) raises here, at the door."""
    distill = distill_config(cfg.distill)
    try:
        stamp_text = stamp(cfg, distill)
    except (ConfigError, DataError, OSError):
        return False  # run() reports the problem
    return not resume_from(student_train(cfg, distill), Path(distill.out_dir), stamp_text).fresh


def folders(cfg: Any) -> list[str]:
    """The student's output folder, written by this run alone (locked by `execute`)."""
    return [distill_config(cfg.distill).out_dir]


def student_train(cfg: Any, distill: DistillConfig) -> TrainConfig:
    """The `train` group with the student's own output folders."""
    return dataclasses.replace(
        train_config(cfg.train), out_dir=distill.out_dir, reports_dir=distill.reports_dir
    )


def run(cfg: Any) -> StageResult:
    distill = distill_config(cfg.distill)
    teacher = load_teacher(distill)
    student = student_config(teacher.config, distill)
    objective = objective_config(teacher.objective if teacher.objective is not None else cfg.objective)
    plan = make_plan(cfg, model=student.to_dict(), objective=objective, train=student_train(cfg, distill))
    layer_map = layer_map_for(distill, teacher.config.n_layers)

    def build() -> DistillModule:
        module = DistillModule(plan.model, plain(plan.objective), plain(plan.optim), plan.trainer.max_steps)
        if distill.init is StudentInit.teacher:
            init_student(module.model, teacher.model, layer_map)
            if teacher.objective_state is not None:  # the objective's own heads (BERT's NSP)
                module.objective.load_state_dict(teacher.objective_state)
        if distill.alpha_ce or distill.alpha_cos:
            module.distil_from(teacher.model, distill)
        return module

    result = fit(plan, stamp(cfg, distill), build)
    run_json = Path(distill.reports_dir) / "run.json"
    write_json(run_json, describe(distill, teacher, layer_map))
    return StageResult(result.metrics, [*result.artifacts, str(run_json)])


def describe(cfg: DistillConfig, teacher: Teacher, layer_map: list[int]) -> dict[str, Any]:
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
