"""Objectives on tiny real models: losses equal a hand-computed cross entropy; NSP head; label smoothing."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.errors import ConfigError
from lmforge.model import build_model
from lmforge.model.config import ModelConfig
from lmforge.objectives import CausalLMObjective, MaskedLMObjective, SpanCorruptionObjective
from lmforge.objectives.collate import CausalLMCollator, MLMCollator, SpanCorruptionCollator
from lmforge.objectives.losses import token_cross_entropy
from lmforge.objectives.masking import IGNORE_INDEX

V, D = 40, 16
PAD, EOS, MASK, CLS, SEP = 0, 1, 2, 3, 4
SENTINELS = list(range(39, 31, -1))


def _model(family: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    config = ModelConfig(
        family=family, vocab_size=V, d_model=D, n_layers=1, n_heads=2, d_ff=32, max_seq_len=32, **kw
    )
    return build_model(config).eval()


def _reference_ce(logits: torch.Tensor, targets: torch.Tensor, eps: float = 0.0) -> tuple[float, float, int]:
    """Textbook (smoothed mean, plain NLL sum, count) over rows whose target is not -100, one row at a time."""
    smoothed, nll_sum, n = 0.0, 0.0, 0
    for row, target in zip(logits.double(), targets.tolist()):
        if target == IGNORE_INDEX:
            continue
        log_z = math.log(sum(math.exp(x) for x in row.tolist()))
        nll = log_z - row[target].item()
        uniform = sum(log_z - x for x in row.tolist()) / len(row)  # cross entropy against the uniform
        smoothed += (1 - eps) * nll + eps * uniform
        nll_sum += nll
        n += 1
    return smoothed / n, nll_sum, n


def _clm_batch() -> dict:
    g = torch.Generator().manual_seed(1)
    items = [{"input_ids": torch.randint(5, V, (n,), generator=g), "index": i} for i, n in enumerate([9, 6])]
    return CausalLMCollator(pad_id=PAD)(items)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_causal_lm_loss_is_next_token_cross_entropy(eps):
    model, batch = _model("decoder"), _clm_batch()
    loss, stats = CausalLMObjective(label_smoothing=eps)(model, batch)
    logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # (B, T, V)
    targets = torch.cat([batch["labels"][:, 1:], torch.full((2, 1), IGNORE_INDEX)], 1)  # next token
    expected, nll_sum, n = _reference_ce(logits.reshape(-1, V), targets.reshape(-1), eps)
    assert n == 8 + 5 and int(stats["n_tokens"]) == n
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats["nll_sum"].item() == pytest.approx(nll_sum, rel=1e-5)  # unsmoothed, for perplexity
    predicted = logits.argmax(-1).reshape(-1)[targets.reshape(-1) != IGNORE_INDEX]
    correct = (predicted == targets.reshape(-1)[targets.reshape(-1) != IGNORE_INDEX]).float().mean()
    assert stats["accuracy"].item() == pytest.approx(correct.item())
    assert all(v.dim() == 0 and not v.requires_grad for v in stats.values())


def test_label_smoothing_raises_the_loss_of_a_confident_correct_model():
    # Smoothing adds eps * (CE against the uniform - NLL): positive when the model is sure and right.
    model, batch = _model("decoder"), _clm_batch()
    plain, plain_stats = CausalLMObjective(0.0)(model, batch)
    smooth, smooth_stats = CausalLMObjective(0.1)(model, batch)
    assert smooth_stats["nll_sum"] == pytest.approx(plain_stats["nll_sum"])  # smoothing never reaches the NLL
    confident = torch.full((1, 5), -10.0)
    confident[0, 2] = 10.0
    target = torch.tensor([2])
    assert token_cross_entropy(confident, target, 0.1).loss > token_cross_entropy(confident, target, 0.0).loss
    uniform = torch.zeros(1, 5)  # every class equally likely: smoothing changes nothing
    assert token_cross_entropy(uniform, target, 0.1).loss.item() == pytest.approx(math.log(5))
    assert not torch.isclose(plain, smooth)


def _mlm_batch(nsp: bool) -> dict:
    g = torch.Generator().manual_seed(2)
    items = []
    for i, (a, b) in enumerate([(4, 6), (7, 3), (3, 3)]):
        ids = torch.cat(
            [
                torch.tensor([CLS]),
                torch.randint(5, V, (a,), generator=g),
                torch.tensor([SEP]),
                torch.randint(5, V, (b,), generator=g),
                torch.tensor([SEP]),
            ]
        )
        item = {"input_ids": ids, "index": i}
        if nsp:
            item |= {"token_type_ids": torch.tensor([0] * (a + 2) + [1] * (b + 1)), "nsp_label": i % 2}
        items.append(item)
    return MLMCollator(PAD, MASK, V, [PAD, EOS, MASK, CLS, SEP], mlm_probability=0.4)(items)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_mlm_loss_is_cross_entropy_on_selected_positions(eps):
    model, batch = _model("encoder"), _mlm_batch(nsp=False)
    objective = MaskedLMObjective(D, nsp=False, label_smoothing=eps)
    loss, stats = objective(model, batch)
    # Dense logits of the same model, selected by hand: the sparse path must agree.
    logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # (B, T, V)
    selected = batch["labels"] != IGNORE_INDEX
    expected, nll_sum, n = _reference_ce(logits[selected], batch["labels"][selected], eps)
    assert n > 0 and int(stats["n_masked"]) == n
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats["mlm_loss"].item() == pytest.approx(expected, rel=1e-5)
    assert stats["nll_sum"].item() == pytest.approx(nll_sum, rel=1e-5)
    assert "nsp_loss" not in stats and not list(objective.parameters())


def test_nsp_head_shapes_and_total_loss():
    model, batch = _model("encoder", n_segments=2), _mlm_batch(nsp=True)
    objective = MaskedLMObjective(D, nsp=True)
    loss, stats = objective(model, batch)
    out = model(
        batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
    )
    nsp_logits = objective.nsp_head(out.last_hidden_state)
    assert nsp_logits.shape == (3, 2)
    assert {k for k in objective.state_dict()} == {
        "nsp_head.pooler.weight",
        "nsp_head.pooler.bias",
        "nsp_head.classifier.weight",
        "nsp_head.classifier.bias",
    }
    pooled = torch.tanh(
        out.last_hidden_state[:, 0] @ objective.nsp_head.pooler.weight.T + objective.nsp_head.pooler.bias
    )
    by_hand = pooled @ objective.nsp_head.classifier.weight.T + objective.nsp_head.classifier.bias
    nsp_expected, _, _ = _reference_ce(by_hand, batch["nsp_labels"])
    assert stats["nsp_loss"].item() == pytest.approx(nsp_expected, rel=1e-5)
    assert loss.item() == pytest.approx(stats["mlm_loss"].item() + nsp_expected, rel=1e-5)
    loss.backward()
    assert objective.nsp_head.classifier.weight.grad is not None
    with pytest.raises(ConfigError, match="nsp_labels"):
        objective(model, {k: v for k, v in batch.items() if k != "nsp_labels"})


def test_mlm_batch_with_nothing_selected_gives_zero_loss_not_nan():
    model = _model("encoder")
    batch = {
        "input_ids": torch.tensor([[CLS, 7, 8, SEP]]),
        "attention_mask": torch.ones(1, 4, dtype=torch.long),
        "labels": torch.full((1, 4), IGNORE_INDEX),
    }
    loss, stats = MaskedLMObjective(D)(model, batch)
    assert loss.item() == 0.0 and int(stats["n_masked"]) == 0 and stats["mlm_accuracy"].item() == 0.0
    loss.backward()


def test_span_corruption_loss_is_decoder_cross_entropy():
    model = _model("encoder_decoder")
    g = torch.Generator().manual_seed(3)
    items = [
        {"input_ids": torch.randint(5, 30, (n,), generator=g), "index": i} for i, n in enumerate([24, 16])
    ]
    batch = SpanCorruptionCollator(SENTINELS, EOS, PAD)(items)
    loss, stats = SpanCorruptionObjective(label_smoothing=0.1)(model, batch)
    logits = model(
        batch["input_ids"],
        attention_mask=batch["attention_mask"],
        decoder_input_ids=batch["decoder_input_ids"],
        decoder_attention_mask=batch["decoder_attention_mask"],
    ).logits  # (B, T_dec, V)
    expected, nll_sum, n = _reference_ce(logits.reshape(-1, V), batch["labels"].reshape(-1), 0.1)
    assert n == int(batch["decoder_attention_mask"].sum()) == int(stats["n_tokens"])
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats["nll_sum"].item() == pytest.approx(nll_sum, rel=1e-5)


def test_bad_label_smoothing_is_a_config_error():
    for objective in (CausalLMObjective, SpanCorruptionObjective):
        with pytest.raises(ConfigError, match="label_smoothing"):
            objective(label_smoothing=1.0)
    with pytest.raises(ConfigError, match="label_smoothing"):
        MaskedLMObjective(D, label_smoothing=-0.1)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("rows", [5, 64, 130])  # below, at and across the fused pass's chunk size
def test_fused_cross_entropy_matches_autograd_cross_entropy(eps, rows):
    g = torch.Generator().manual_seed(rows)
    logits = (torch.randn(rows, 37, generator=g) * 3).requires_grad_()
    targets = torch.randint(0, 37, (rows,), generator=g)
    targets[::4] = IGNORE_INDEX
    ref_logits = logits.detach().clone().requires_grad_()
    counted = targets != IGNORE_INDEX
    expected = torch.nn.functional.cross_entropy(ref_logits, targets, label_smoothing=eps)
    expected.backward(torch.tensor(2.5))  # an upstream gradient other than 1 reaches the logits
    result = token_cross_entropy(logits, targets, eps)
    result.loss.backward(torch.tensor(2.5))
    torch.testing.assert_close(result.loss, expected.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(logits.grad, ref_logits.grad, rtol=1e-5, atol=1e-7)
    nll = torch.nn.functional.cross_entropy(logits.detach(), targets, reduction="sum")
    torch.testing.assert_close(result.nll_sum, nll, rtol=1e-6, atol=1e-5)
    assert torch.equal(result.predictions, logits.detach().argmax(-1))
    assert int(result.n_correct) == int(((logits.argmax(-1) == targets) & counted).sum())


def test_fused_cross_entropy_on_bf16_logits_and_without_grad():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(70, 50, generator=g).bfloat16().requires_grad_()
    targets = torch.randint(0, 50, (70,), generator=g)
    result = token_cross_entropy(logits, targets)
    result.loss.backward()
    expected = torch.nn.functional.cross_entropy(logits.detach().float(), targets)
    torch.testing.assert_close(result.loss, expected, rtol=1e-6, atol=1e-6)
    assert logits.grad.dtype == torch.bfloat16
    with torch.no_grad():  # evaluation: no gradient is computed or kept
        assert token_cross_entropy(logits, targets).loss.item() == pytest.approx(expected.item(), rel=1e-6)
    empty = token_cross_entropy(torch.zeros(3, 4, requires_grad=True), torch.full((3,), IGNORE_INDEX))
    assert empty.loss.item() == 0.0 and int(empty.n_tokens) == 0
