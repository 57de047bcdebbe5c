"""LoRA and freezing on our models: adapters start as a no-op, merge exactly, train only themselves;
frozen parameters do not move in a real optimizer step."""

from __future__ import annotations

import pytest
import torch

from helpers import tiny
from lmforge.errors import ConfigError
from lmforge.finetune.adapt import AdaptConfig, add_lora, freeze, merge, trainable_parameters
from lmforge.model import build_model


def encoder():
    torch.manual_seed(0)
    return build_model(tiny(family="encoder", position="learned", n_segments=2)).eval()


def ids():
    return torch.randint(0, 61, (2, 9), generator=torch.Generator().manual_seed(1))


def test_lora_at_init_leaves_outputs_unchanged_and_trains_only_adapters():
    model, x = encoder(), ids()
    before = model(x).logits
    adapted = add_lora(model, AdaptConfig(lora=True, lora_rank=4, lora_targets=["q_proj", "fc_in"]))
    torch.testing.assert_close(adapted(x).logits, before, atol=0, rtol=0)  # B = 0: exactly the same
    names = [n for n, p in adapted.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    per_layer = 4 * (32 + 32) + 4 * (32 + 64)  # q_proj: A (4x32), B (32x4); fc_in: A (4x32), B (64x4)
    assert trainable_parameters(adapted) == 2 * per_layer


def test_merged_lora_equals_unmerged_and_is_a_plain_model_again():
    model, x = encoder(), ids()
    keys = set(model.state_dict())
    adapted = add_lora(model, AdaptConfig(lora=True, lora_rank=2, lora_alpha=8.0, lora_targets=["v_proj"]))
    with torch.no_grad():
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)  # a trained adapter
    unmerged = adapted(x).logits
    merged = merge(adapted)
    torch.testing.assert_close(merged(x).logits, unmerged, atol=1e-5, rtol=1e-5)
    assert set(merged.state_dict()) == keys  # same parameter names: loads into a plain build_model


def test_lora_targets_that_match_nothing_are_one_line():
    with pytest.raises(ConfigError, match=r"adapt.lora_targets: \['query'\] match no Linear layer.*q_proj"):
        add_lora(encoder(), AdaptConfig(lora=True, lora_targets=["query"]))


@pytest.mark.parametrize(
    "how, layers, moving",
    [
        ("embeddings", 0, lambda n: not n.startswith("embeddings.")),
        ("bottom", 1, lambda n: not n.startswith(("embeddings.", "stack.layers.0."))),
        ("backbone", 0, lambda n: False),
    ],
)
def test_frozen_parameters_do_not_move(how, layers, moving):
    model, x = encoder(), ids()
    head = torch.nn.Linear(32, 3)
    freeze(model, AdaptConfig(freeze=how, freeze_layers=layers))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    params = [p for p in [*model.parameters(), *head.parameters()] if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=0.1)
    model.train()
    loss = head(model(x).last_hidden_state[:, 0]).logsumexp(-1).sum()
    loss.backward()
    optimizer.step()
    for name, param in model.named_parameters():
        assert torch.equal(param, before[name]) != moving(name), name
    assert trainable_parameters(model) == sum(p.numel() for n, p in model.named_parameters() if moving(n))


def test_bad_adapt_values_are_one_line():
    with pytest.raises(ConfigError, match="adapt.freeze: got 'top', expected one of: none, embeddings"):
        AdaptConfig(freeze="top")
    with pytest.raises(
        ConfigError, match="adapt.freeze_layers: got 2, expected 0, or >= 1 with freeze=bottom"
    ):
        AdaptConfig(freeze_layers=2)
