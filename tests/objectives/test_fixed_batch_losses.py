"""The speed work of issue 10 may not change what the models compute: the loss and gradient norm of
each objective on a fixed batch, recorded with the code before it (commit 2d3d311: autograd's
cross-entropy, explicit all-ones masks, the hand-written RMSNorm), must come out the same."""

from __future__ import annotations

import pytest
import torch

from lmforge.model import build_model
from lmforge.model.config import ModelConfig
from lmforge.objectives import CausalLMObjective, MaskedLMObjective, SpanCorruptionObjective
from lmforge.objectives.collate import CausalLMCollator, MLMCollator, SpanCorruptionCollator


def config(family: str, **kw) -> ModelConfig:
    return ModelConfig(
        family=family, vocab_size=64, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=32, **kw
    )


CASES = {
    # name: (config, objective, collator, (loss, gradient norm, nll_sum) recorded at 2d3d311)
    "gpt": (
        config("decoder", position="learned"),
        lambda: CausalLMObjective(0.1),
        lambda: CausalLMCollator(0),
        (4.14299201965332, 1.2980097532272339, 207.0171661376953),
    ),
    "llama": (
        config("decoder", n_kv_heads=2, norm="rms", activation="swiglu", bias=False, tie_embeddings=False),
        lambda: CausalLMObjective(),
        lambda: CausalLMCollator(0),
        (4.156890869140625, 1.153530240058899, 207.84454345703125),
    ),
    "bert": (
        config(
            "encoder",
            position="learned",
            norm_placement="post",
            final_norm=False,
            embedding_norm=True,
            n_segments=2,
            head_transform=True,
            head_bias=True,
        ),  # fmt: skip
        lambda: MaskedLMObjective(32),
        lambda: MLMCollator(0, 2, 64, [0, 1, 2, 3, 4], 0.3, seed=1),
        (4.115873336791992, 2.387671709060669, 69.9698486328125),
    ),
    "t5": (
        config("encoder_decoder", position="relative", norm="rms", activation="relu", bias=False),
        lambda: SpanCorruptionObjective(),
        lambda: SpanCorruptionCollator(
            [63, 62, 61, 60, 59, 58, 57, 56], 1, 0, noise_density=0.15, mean_span_length=3.0, seed=1
        ),
        (4.2150726318359375, 3.5619163513183594, 59.011016845703125),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_loss_and_gradient_on_a_fixed_batch_are_unchanged(name):
    model_config, objective, collator, (loss_before, grad_before, nll_before) = CASES[name]
    g = torch.Generator().manual_seed(3)
    lengths = [20, 13, 20]  # one padded row: the masked path; the full rows alone take the fast path
    items = [
        {"input_ids": torch.randint(5, 64, (n,), generator=g), "index": i} for i, n in enumerate(lengths)
    ]
    torch.manual_seed(0)
    model = build_model(model_config)
    loss, stats = objective()(model, collator()(items))
    loss.backward()
    grad_norm = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters() if p.grad is not None))
    assert loss.item() == pytest.approx(loss_before, rel=1e-6)
    assert grad_norm.item() == pytest.approx(grad_before, rel=1e-6)
    assert stats["nll_sum"].item() == pytest.approx(nll_before, rel=1e-6)


@pytest.mark.parametrize("family", ["decoder", "encoder"])
def test_an_all_ones_mask_gives_exactly_what_no_mask_gives(family):
    torch.manual_seed(0)
    model = build_model(config(family, position="rope")).eval()
    ids = torch.randint(5, 64, (2, 12))
    with torch.no_grad():
        masked = model(ids, attention_mask=torch.ones_like(ids)).logits
        plain = model(ids).logits
    assert torch.equal(masked, plain)
