"""The fused vocabulary projection + cross-entropy (objectives/losses.py `linear_cross_entropy`)
against `F.linear` + `F.cross_entropy` through autograd, and each objective with `loss_chunk` (the
head fused with the loss) against the same objective reading the head's logits, on tiny models of
each family: losses, every parameter's gradient and the stats (benchmarks/linear_ce.py times it)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import tiny
from lmforge.errors import ConfigError
from lmforge.model import build_model
from lmforge.objectives import CausalLMObjective, MaskedLMObjective, Seq2SeqObjective
from lmforge.objectives.losses import linear_cross_entropy
from lmforge.objectives.masking import IGNORE_INDEX


@pytest.mark.parametrize("softcap", [None, 3.0])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_values_and_gradients_equal_linear_then_cross_entropy(label_smoothing, with_bias, chunk, softcap):
    """With `softcap` c the reference is autograd through c * tanh(logits / c): the soft-cap's gradient."""
    gen = torch.Generator().manual_seed(0)
    n, d, vocab = 37, 8, 50
    hidden = torch.randn(n, d, generator=gen, requires_grad=True)
    weight = torch.randn(vocab, d, generator=gen, requires_grad=True)
    bias = torch.randn(vocab, generator=gen, requires_grad=True) if with_bias else None
    targets = torch.randint(0, vocab, (n,), generator=gen)
    targets[::5] = IGNORE_INDEX
    inputs = [hidden, weight] + ([bias] if with_bias else [])

    result = linear_cross_entropy(hidden, weight, bias, targets, label_smoothing, chunk, softcap)
    grads = torch.autograd.grad(result.loss, inputs)
    logits = F.linear(hidden, weight, bias)
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    expected = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, label_smoothing=label_smoothing)
    expected_grads = torch.autograd.grad(expected, inputs)

    counted = targets != IGNORE_INDEX
    torch.testing.assert_close(result.loss, expected)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)
    nll = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, reduction="sum")
    torch.testing.assert_close(result.nll_sum, nll.detach())  # unsmoothed, summed
    assert result.n_tokens == counted.sum() == 29  # rows 0, 5, ..., 35 ignored
    assert torch.equal(result.predictions, logits.argmax(-1))
    assert result.n_correct == ((logits.argmax(-1) == targets) & counted).sum()


def test_nothing_to_predict_gives_zero_loss_and_zero_gradients():
    hidden = torch.randn(4, 3, requires_grad=True)
    weight = torch.randn(5, 3, requires_grad=True)
    result = linear_cross_entropy(hidden, weight, None, torch.full((4,), IGNORE_INDEX), chunk=2)
    result.loss.backward()
    assert result.loss == 0 and result.n_tokens == 0
    assert not hidden.grad.any() and not weight.grad.any()


def test_a_chunk_below_one_is_refused():
    with pytest.raises(ConfigError, match=r"objective.loss_chunk: got 0, expected"):
        linear_cross_entropy(
            torch.randn(2, 3), torch.randn(4, 3), None, torch.zeros(2, dtype=torch.long), chunk=0
        )


def _batch(vocab: int, seed: int = 1) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (3, 9), generator=gen)
    mask = torch.ones_like(ids)
    mask[2, 6:] = 0  # right padding: its labels are ignored
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, IGNORE_INDEX)}


def _assert_same(objective, chunk, model, batch):
    """`objective` with `loss_chunk=chunk` against itself reading the head's logits (loss_chunk=None)."""
    params = [p for p in model.parameters() if p.requires_grad] + list(objective.parameters())
    objective.loss_chunk = chunk
    loss, stats = objective(model, batch)
    grads = torch.autograd.grad(loss, params)
    objective.loss_chunk = None
    expected, expected_stats = objective(model, batch)
    expected_grads = torch.autograd.grad(expected, params)
    torch.testing.assert_close(loss, expected)
    for got, want in zip(grads, expected_grads):  # a tied embedding gets both of its gradients
        torch.testing.assert_close(got, want)
    assert stats.keys() == expected_stats.keys()
    for key, value in expected_stats.items():
        if value.dtype.is_floating_point:
            torch.testing.assert_close(stats[key], value)
        else:
            assert torch.equal(stats[key], value), key


@pytest.mark.parametrize("softcap", [None, 2.0])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_the_fused_causal_lm_equals_the_logits_one_on_a_tied_decoder(label_smoothing, softcap):
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", tie_embeddings=True, logit_softcap=softcap))
    _assert_same(CausalLMObjective(label_smoothing), 4, model, _batch(model.config.vocab_size))


@pytest.mark.parametrize("nsp", [False, True])
def test_the_fused_masked_lm_equals_the_logits_one_through_the_bert_head_transform(nsp):
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder", head_transform=True, head_bias=True, n_segments=2))
    batch = _batch(model.config.vocab_size)
    keep = torch.rand(batch["labels"].shape, generator=torch.Generator().manual_seed(2)) < 0.4
    batch["labels"] = batch["labels"].masked_fill(~keep, IGNORE_INDEX)  # sparse: a few positions predicted
    batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
    batch["nsp_labels"] = torch.tensor([0, 1, 1])
    _assert_same(MaskedLMObjective(model.config.d_model, nsp=nsp, label_smoothing=0.1), 3, model, batch)


def test_the_fused_seq2seq_equals_the_logits_one_on_a_scaled_t5_head():
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder_decoder", tie_embeddings=True, scale_output=True))
    batch = _batch(model.config.vocab_size)
    batch["decoder_input_ids"] = _batch(model.config.vocab_size, seed=3)["input_ids"][:, :7]
    batch["decoder_attention_mask"] = torch.ones_like(batch["decoder_input_ids"])
    batch["labels"] = _batch(model.config.vocab_size, seed=4)["labels"][:, :7]
    _assert_same(Seq2SeqObjective(0.1), 5, model, batch)


def test_a_loss_chunk_below_one_is_refused_in_the_config():
    from lmforge.training.config import ObjectiveConfig

    with pytest.raises(ConfigError, match=r"objective.loss_chunk: got 0, expected an integer >= 1 or null"):
        ObjectiveConfig(loss_chunk=0)
    assert ObjectiveConfig(loss_chunk=None).loss_chunk is None


def test_under_bf16_autocast_the_projections_run_in_bf16_and_the_loss_in_float32():
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(40, 16, generator=gen, requires_grad=True)
    weight = torch.randn(30, 16, generator=gen, requires_grad=True)
    targets = torch.randint(0, 30, (40,), generator=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = linear_cross_entropy(hidden, weight, None, targets, chunk=16)
        expected = F.cross_entropy(F.linear(hidden, weight).float(), targets)
    grads = torch.autograd.grad(result.loss, [hidden, weight])
    expected_grads = torch.autograd.grad(expected, [hidden, weight])
    assert result.loss.dtype == torch.float32
    torch.testing.assert_close(result.loss, expected, rtol=1e-3, atol=1e-3)  # the same bf16 logits
    for got, want in zip(grads, expected_grads):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)  # bf16 gradient matmuls
