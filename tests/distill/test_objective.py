"""Distillation on tiny real models, encoder (MLM + NSP) and decoder (causal LM): the KL against a
by-hand softmax KL and its T^2 scaling, the loss weights, and a teacher no optimizer step reaches."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import student_of, tiny
from lmforge.distill.config import DistillConfig
from lmforge.distill.objective import Distillation, positions, rows, soft_target_kl
from lmforge.errors import ConfigError
from lmforge.model import build_model
from lmforge.objectives.masking import IGNORE_INDEX
from lmforge.training.config import objective_config
from lmforge.training.objectives import OBJECTIVES

# objective -> (teacher config, objective config); init_std=0.5 puts the logits far enough from uniform
# that the KL is well above float32 rounding, so the by-hand reference can be matched at rel=1e-5
KINDS = {
    "mlm": (
        dict(family="encoder", position="learned", n_segments=2, n_layers=4, init_std=0.5),
        {"kind": "mlm", "nsp": True},
    ),
    "clm": (dict(family="decoder", n_layers=4, init_std=0.5), {"kind": "clm"}),
}


def setup(kind: str, **distill):
    """A 4-layer teacher, its student (half depth unless told), the task objective from the registry."""
    model_values, objective_values = KINDS[kind]
    torch.manual_seed(0)
    teacher = build_model(tiny(**model_values))
    student = student_of(teacher, teacher.config, DistillConfig(**distill))
    objective = objective_config(objective_values)
    return teacher, student, OBJECTIVES[objective.kind].loss(objective, student.config)


def dense_logits(model: nn.Module, batch: dict) -> torch.Tensor:
    token_types = batch.get("token_type_ids") if model.config.n_segments else None
    return model(batch["input_ids"], batch.get("attention_mask"), token_types).logits.detach()  # (B, T, V)


def loss_rows(kind: str, batch: dict) -> torch.Tensor:
    """Where the KL runs: the masked positions for MLM, every real token for the causal LM."""
    return batch["labels"] != IGNORE_INDEX if kind == "mlm" else batch["attention_mask"].bool()


@pytest.fixture
def batches(mlm_batch, clm_batch):
    return {"mlm": mlm_batch, "clm": clm_batch}


@pytest.mark.parametrize("kind", ["mlm", "clm"])
def test_a_student_that_copies_its_teacher_has_no_distillation_loss(kind, batches):
    teacher, student, task = setup(kind, student_layers=4)  # identity map
    _, stats = Distillation(task, teacher)(student, batches[kind])
    assert stats["distill_kl"].item() == pytest.approx(0.0, abs=1e-6)
    assert stats["distill_cos"].item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("kind", ["mlm", "clm"])
@pytest.mark.parametrize("temperature", [1.0, 4.0])
def test_kl_is_a_by_hand_softmax_kl_times_t_squared_over_the_loss_positions(kind, temperature, batches):
    teacher, student, task = setup(kind)
    batch = batches[kind]
    _, stats = Distillation(task, teacher, temperature)(student, batch)
    rows = loss_rows(kind, batch)
    s = dense_logits(student, batch)[rows].double() / temperature  # (N, V)
    t = dense_logits(teacher, batch)[rows].double() / temperature
    p_t = t.exp() / t.exp().sum(-1, keepdim=True)
    p_s = s.exp() / s.exp().sum(-1, keepdim=True)
    reference = (p_t * (p_t / p_s).log()).sum(-1).mean() * temperature**2
    assert 0 < rows.sum() < rows.numel()
    assert stats["distill_kl"].item() == pytest.approx(reference.item(), rel=1e-5)


def test_kl_scales_as_t_squared_and_tends_to_logit_matching():
    g = torch.Generator().manual_seed(0)
    s, t = (
        torch.randn(5, 7, generator=g, dtype=torch.float64),
        torch.randn(5, 7, generator=g, dtype=torch.float64),
    )
    for temperature in (0.5, 2.0, 8.0):
        scaled = temperature**2 * soft_target_kl(s / temperature, t / temperature, 1.0)
        torch.testing.assert_close(soft_target_kl(s, t, temperature), scaled)
    # Hinton et al. 2015, section 2.1: for large T, KL * T^2 -> sum((s - mean s) - (t - mean t))^2 / 2V
    centred = (s - s.mean(-1, keepdim=True)) - (t - t.mean(-1, keepdim=True))
    matching = (centred**2).sum(-1).mean() / (2 * s.shape[-1])
    assert soft_target_kl(s, t, 1e3).item() == pytest.approx(matching.item(), rel=1e-2)


@pytest.mark.parametrize("kind", ["mlm", "clm"])
def test_the_total_is_the_configured_weighted_sum(kind, batches):
    teacher, student, task = setup(kind)
    batch = batches[kind]
    for alphas in [(5.0, 2.0, 1.0), (0.5, 0.0, 3.0)]:
        loss, stats = Distillation(task, teacher, 2.0, *alphas)(student, batch)
        terms = torch.stack([stats["distill_kl"], stats["task_loss"], stats["distill_cos"]])
        assert (terms > 0).all()
        assert loss.item() == pytest.approx((torch.tensor(alphas) * terms).sum().item(), rel=1e-6)
        assert stats["loss"] == loss.detach()
    plain_loss, plain_stats = task(student, batch)
    loss, stats = Distillation(task, teacher, 2.0, alpha_ce=0.0, alpha_task=1.0, alpha_cos=0.0)(
        student, batch
    )
    assert torch.equal(loss, plain_loss)  # alpha_task alone is the plain objective, exactly
    assert torch.equal(stats["task_loss"], plain_stats["loss"])
    assert all(torch.equal(stats[k], v) for k, v in plain_stats.items() if k != "loss")  # NSP, sums, ...
    assert all(v.dim() == 0 and not v.requires_grad for v in stats.values())


def test_an_optimizer_step_moves_the_student_and_never_the_teacher(mlm_batch):
    teacher, student, task = setup("mlm")
    distillation = Distillation(task, teacher)
    module = nn.ModuleDict({"model": student, "objective": distillation}).train()  # as Lightning does
    teacher_before = {n: p.detach().clone() for n, p in teacher.named_parameters()}
    student_before = {n: p.detach().clone() for n, p in student.named_parameters()}
    optimizer = torch.optim.AdamW(module.parameters(), lr=0.1)
    loss, _ = distillation(student, mlm_batch)
    loss.backward()
    optimizer.step()
    assert not teacher.training and student.training
    for name, param in teacher.named_parameters():
        assert param.grad is None and not param.requires_grad, name
        assert torch.equal(param, teacher_before[name]), name
    assert any(not torch.equal(p, student_before[n]) for n, p in student.named_parameters())
    assert task.nsp_head.classifier.weight.grad is not None  # the task's own head trains
    assert not {id(p) for p in teacher.parameters()} & {id(p) for p in module.parameters()}
    assert all(key.startswith("task.nsp_head.") for key in distillation.state_dict())


def test_loss_positions_are_the_predict_mask_else_real_tokens_else_all():
    hidden = torch.zeros(2, 3, 4)
    predict = torch.tensor([[True, False, False], [False, True, False]])
    real = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert torch.equal(positions({"predict_mask": predict, "attention_mask": real}, hidden), predict)
    assert torch.equal(positions({"attention_mask": real, "predict_mask": None}, hidden), real.bool())
    assert positions({}, hidden).all() and positions({}, hidden).shape == (2, 3)


def test_bad_teacher_student_pairs_are_one_line(clm_batch):
    torch.manual_seed(0)
    teacher = build_model(tiny(n_layers=2))
    objective = objective_config({"kind": "clm"})
    task = OBJECTIVES[objective.kind].loss(objective, teacher.config)
    with pytest.raises(ConfigError, match=r"distill.temperature: got 0, expected a number > 0"):
        Distillation(task, teacher, temperature=0)
    wider_vocabulary = build_model(tiny(vocab_size=70, n_layers=1))
    with pytest.raises(
        ConfigError, match=r"student logits \(\d+, 70\) and teacher logits \(\d+, 61\) differ"
    ):
        Distillation(task, teacher)(wider_vocabulary, clm_batch)
    narrower = build_model(tiny(d_model=16, n_heads=2, n_layers=1))
    with pytest.raises(
        ConfigError, match=r"distill.alpha_cos: got 1.0 with student width 16 and teacher width 32"
    ):
        Distillation(task, teacher)(narrower, clm_batch)
    _, stats = Distillation(task, teacher, alpha_cos=0.0)(narrower, clm_batch)
    assert stats["distill_cos"] == 0 and stats["distill_kl"] > 0


@pytest.mark.parametrize("chunk", [7 * 3, 1 << 20])  # three rows a chunk (several chunks), or one chunk
def test_chunked_kl_and_its_gradient_equal_autograd_through_log_softmax_and_kl_div(chunk, monkeypatch):
    monkeypatch.setattr("lmforge.distill.objective.CHUNK", chunk)
    g = torch.Generator().manual_seed(1)
    s = torch.randn(10, 7, generator=g, dtype=torch.float64, requires_grad=True)
    t = torch.randn(10, 7, generator=g, dtype=torch.float64, requires_grad=True)
    weights = torch.tensor([1.0, 0, 1, 1, 0, 0, 1, 1, 1, 0])
    loss = soft_target_kl(s, t, 3.0, weights)
    loss.backward()
    kept = weights.bool()
    reference_s = s.detach()[kept].clone().requires_grad_(True)
    per_row = F.kl_div(
        F.log_softmax(reference_s / 3.0, -1),
        F.log_softmax(t.detach()[kept] / 3.0, -1),
        log_target=True,
        reduction="sum",
    )
    reference = per_row / kept.sum() * 9.0
    reference.backward()
    torch.testing.assert_close(loss, reference)
    expected_grad = torch.zeros_like(s)
    expected_grad[kept] = reference_s.grad
    torch.testing.assert_close(s.grad, expected_grad)  # rows of weight 0 get none
    assert t.grad is None  # the teacher is a constant target


def test_dense_logits_are_weighted_by_their_positions_not_indexed():
    logits = torch.randn(2, 3, 5)
    where = torch.tensor([[True, False, True], [False, True, True]])
    flat, weights = rows(logits, where)
    assert flat.shape == (6, 5) and torch.equal(weights, torch.tensor([1.0, 0, 1, 0, 1, 1]))
    sparse = torch.randn(4, 5)
    assert rows(sparse, where) == (sparse, None)


def test_without_a_teacher_term_the_teacher_is_never_called(mlm_batch):
    """The control (alpha_ce = alpha_cos = 0) pays for no teacher forward pass."""
    teacher, student, task = setup("mlm")

    def refuse(*args, **kwargs):
        raise AssertionError("the teacher was called")

    teacher.forward = refuse
    loss, stats = Distillation(task, teacher, 2.0, alpha_ce=0.0, alpha_task=1.0, alpha_cos=0.0)(
        student, mlm_batch
    )
    assert torch.isfinite(loss) and stats["distill_kl"] == 0 and stats["distill_cos"] == 0
