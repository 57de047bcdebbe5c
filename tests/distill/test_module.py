"""The distillation LightningModule: a PretrainModule of the student whose checkpoints are pretrain
checkpoints, trained on the distillation loss and validated on the plain objective."""

from __future__ import annotations

import torch

from helpers import tiny
from lmforge.distill.config import DistillConfig
from lmforge.distill.module import DistillModule
from lmforge.model import build_model
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, OptimConfig
from lmforge.training.module import PretrainModule

OBJECTIVE = ObjectiveConfig(name="bert", kind=ObjectiveKind.mlm, nsp=True)


def test_it_saves_what_a_pretrain_module_saves_and_switches_loss_with_the_mode(mlm_batch):
    torch.manual_seed(0)
    config = tiny(family="encoder", position="learned", n_segments=2, n_layers=2)
    teacher = build_model(tiny(family="encoder", position="learned", n_segments=2, n_layers=4)).eval()
    module = DistillModule(config, OBJECTIVE, OptimConfig(), max_steps=1).distil_from(
        teacher, DistillConfig()
    )
    plain = PretrainModule(config, OBJECTIVE, OptimConfig(), max_steps=1)
    assert dict(module.hparams) == dict(plain.hparams)
    assert module.state_dict().keys() == plain.state_dict().keys()  # no teacher, no second NSP head
    plain.load_state_dict(module.state_dict(), strict=True)
    assert {id(p) for p in module.parameters()} == {
        id(p) for p in [*module.model.parameters(), *module.objective.parameters()]
    }

    _, train_stats = module.train()(mlm_batch)
    assert {"distill_kl", "distill_cos", "task_loss"} <= set(train_stats)
    val_loss, val_stats = module.eval()(mlm_batch)
    plain_loss, _ = plain.eval()(mlm_batch)
    assert "distill_kl" not in val_stats and torch.equal(val_loss, plain_loss)
    assert not teacher.training  # module.train() does not reach the teacher
