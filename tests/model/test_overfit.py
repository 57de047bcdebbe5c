"""A tiny model of every family memorises one fixed batch: its loss falls by more than 90%."""

from __future__ import annotations

import pytest
import torch

from helpers import tiny
from lmforge.model import build_model
from lmforge.objectives import CausalLMObjective, MaskedLMObjective, SpanCorruptionObjective
from lmforge.objectives.collate import CausalLMCollator, MLMCollator, SpanCorruptionCollator

VOCAB, PAD, CLS, SEP, MASK = 64, 0, 1, 2, 3
SENTINELS = list(range(54, 64))


def _batch(family: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, 54, (8, 24), generator=g)
    items = [{"input_ids": t, "index": i} for i, t in enumerate(tokens)]
    if family == "decoder":
        return CausalLMCollator(PAD)(items)
    if family == "encoder":
        for item in items:
            item["input_ids"] = torch.cat([torch.tensor([CLS]), item["input_ids"], torch.tensor([SEP])])
        collate = MLMCollator(PAD, MASK, VOCAB, [PAD, CLS, SEP, MASK, *SENTINELS], 0.15)
        return collate(items)
    return SpanCorruptionCollator(SENTINELS, eos_id=SEP, pad_id=PAD)(items)


OBJECTIVES = {
    "decoder": lambda: CausalLMObjective(),
    "encoder": lambda: MaskedLMObjective(d_model=64),
    "encoder_decoder": lambda: SpanCorruptionObjective(),
}


@pytest.mark.parametrize(
    ("family", "overrides"),
    [
        ("decoder", {"position": "rope", "norm": "rms", "activation": "swiglu", "n_kv_heads": 2}),
        ("encoder", {"position": "learned", "norm_placement": "post", "final_norm": False, "n_segments": 2}),
        ("encoder_decoder", {"position": "relative", "norm": "rms", "bias": False}),
    ],
)
def test_tiny_model_overfits_one_batch(family, overrides):
    torch.manual_seed(0)
    model = build_model(tiny(family=family, vocab_size=VOCAB, d_model=64, d_ff=128, **overrides))
    objective = OBJECTIVES[family]()
    optimizer = torch.optim.AdamW([*model.parameters(), *objective.parameters()], lr=3e-3)
    batch = _batch(family)
    losses = []
    for _ in range(150):
        loss, _ = objective(model, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])
