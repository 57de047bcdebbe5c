"""The fused linear + cross-entropy of benchmarks/linear_ce.py against `F.linear` + `F.cross_entropy`
through autograd, and its causal LM objective against the stage's on a tiny decoder (the benchmark
itself times training steps and runs in `python -m benchmarks`)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from helpers import tiny
from lmforge.model import build_model
from lmforge.objectives.clm import CausalLMObjective
from lmforge.objectives.masking import IGNORE_INDEX

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fused(monkeypatch):
    """benchmarks/linear_ce.py, imported as `python -m benchmarks` does (from the repository root)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("benchmarks.linear_ce")


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_values_and_gradients_equal_linear_then_cross_entropy(fused, label_smoothing, with_bias, chunk):
    gen = torch.Generator().manual_seed(0)
    n, d, vocab = 37, 8, 50
    hidden = torch.randn(n, d, generator=gen, requires_grad=True)
    weight = torch.randn(vocab, d, generator=gen, requires_grad=True)
    bias = torch.randn(vocab, generator=gen, requires_grad=True) if with_bias else None
    targets = torch.randint(0, vocab, (n,), generator=gen)
    targets[::5] = IGNORE_INDEX
    inputs = [hidden, weight] + ([bias] if with_bias else [])

    result = fused.linear_cross_entropy(hidden, weight, bias, targets, label_smoothing, chunk)
    grads = torch.autograd.grad(result.loss, inputs)
    logits = F.linear(hidden, weight, bias)
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


def test_nothing_to_predict_gives_zero_loss_and_zero_gradients(fused):
    hidden = torch.randn(4, 3, requires_grad=True)
    weight = torch.randn(5, 3, requires_grad=True)
    result = fused.linear_cross_entropy(hidden, weight, None, torch.full((4,), IGNORE_INDEX), chunk=2)
    result.loss.backward()
    assert result.loss == 0 and result.n_tokens == 0
    assert not hidden.grad.any() and not weight.grad.any()


def test_a_chunk_below_one_is_refused(fused):
    with pytest.raises(ValueError, match=r"chunk=0: expected rows per chunk >= 1"):
        fused.linear_cross_entropy(
            torch.randn(2, 3), torch.randn(4, 3), None, torch.zeros(2, dtype=torch.long), chunk=0
        )


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_the_fused_objective_equals_the_stage_objective_on_a_tied_decoder(fused, label_smoothing):
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", tie_embeddings=True))
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(4, model.config.vocab_size, (3, 9), generator=gen)
    mask = torch.ones_like(ids)
    mask[2, 6:] = 0  # right padding: its labels are ignored
    batch = {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, IGNORE_INDEX)}
    params = [p for p in model.parameters() if p.requires_grad]

    loss, stats = fused.FusedCausalLM(label_smoothing, chunk=4)(model, batch)
    grads = torch.autograd.grad(loss, params)
    expected, expected_stats = CausalLMObjective(label_smoothing)(model, batch)
    expected_grads = torch.autograd.grad(expected, params)

    torch.testing.assert_close(loss, expected)
    for got, want in zip(grads, expected_grads):  # the tied embedding gets both of its gradients
        torch.testing.assert_close(got, want)
    for key in ("n_tokens", "n_correct"):
        assert torch.equal(stats[key], expected_stats[key]), key
    torch.testing.assert_close(stats["nll_sum"], expected_stats["nll_sum"])
