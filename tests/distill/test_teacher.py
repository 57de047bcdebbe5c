"""The teacher from a pretrain checkpoint: its weights, frozen, with the objective it was trained on;
then the whole recipe on it (student from the teacher, its task from the registry, a finite loss)."""

from __future__ import annotations

import pytest
import torch

from helpers import student_of, tiny
from lmforge.distill.config import DistillConfig
from lmforge.distill.objective import Distillation
from lmforge.distill.stage import load_teacher
from lmforge.errors import DataError
from lmforge.model import build_model
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, OptimConfig
from lmforge.training.module import PretrainModule
from lmforge.training.objectives import OBJECTIVES

OBJECTIVE = ObjectiveConfig(name="bert", kind=ObjectiveKind.mlm, nsp=True)


def write_pretrain_checkpoint(folder, model) -> None:
    """What the pretrain stage saves: a PretrainModule's weights (network and NSP head) and hyperparameters."""
    module = PretrainModule(model.config, OBJECTIVE, OptimConfig(), max_steps=1)
    module.model.load_state_dict(model.state_dict())
    folder.mkdir(parents=True)
    torch.save(
        {"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, folder / "best.ckpt"
    )


def test_pretrained_teacher_is_the_checkpoint_frozen_and_distils(tmp_path, mlm_batch):
    torch.manual_seed(0)
    original = build_model(tiny(family="encoder", position="learned", n_segments=2, n_layers=4))
    write_pretrain_checkpoint(tmp_path / "encoder", original)
    cfg = DistillConfig(models_dir=str(tmp_path), backbone="encoder")
    teacher = load_teacher(cfg)
    assert teacher.config == original.config
    assert teacher.objective == OBJECTIVE  # read back from the checkpoint's plain values
    assert not teacher.model.training and not any(p.requires_grad for p in teacher.model.parameters())
    for key, value in original.state_dict().items():
        assert torch.equal(teacher.model.state_dict()[key], value), key

    student = student_of(teacher.model, teacher.config, cfg)
    task = OBJECTIVES[OBJECTIVE.kind].loss(teacher.objective, student.config)
    loss, stats = Distillation(task, teacher.model)(student, mlm_batch)
    assert torch.isfinite(loss) and {"distill_kl", "distill_cos", "task_loss", "nsp_loss"} <= set(stats)


def test_a_missing_teacher_is_one_line(tmp_path):
    with pytest.raises(DataError, match=r"checkpoint .*best.ckpt does not exist"):
        load_teacher(DistillConfig(models_dir=str(tmp_path), backbone="encoder"))
    with pytest.raises(
        DataError, match=r"distill.teacher=hf:.*nope: no such folder, and not a packaged model"
    ):
        load_teacher(DistillConfig(teacher=f"hf:{tmp_path / 'nope'}"))
