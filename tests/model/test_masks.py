"""Information flow: causal and sliding-window masks block gradients; encoders are bidirectional;
padding never changes the outputs of real tokens."""

from __future__ import annotations

import pytest
import torch

from helpers import tiny
from lmforge.model import build_model
from lmforge.model.components.masks import self_attention_mask

POSITIONS = ["learned", "sinusoidal", "rope", "alibi", "relative", "none"]


def _input_gradients(model, ids: torch.Tensor, t: int) -> torch.Tensor:
    """|d output[t] / d embedding[s]| summed over features, for every source position s."""
    embeddings = model.embeddings.tok(ids).detach().requires_grad_(True)
    handle = model.embeddings.tok.register_forward_hook(lambda *_: embeddings)
    try:
        model(ids).logits[0, t].sum().backward()
    finally:
        handle.remove()
    return embeddings.grad[0].abs().sum(-1)  # (T,)


@pytest.mark.parametrize("position", POSITIONS)
def test_causal_decoder_sees_no_future(position):
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", position=position))
    ids = torch.randint(0, 61, (1, 12))
    for t in (0, 5, 11):
        grad = _input_gradients(model, ids, t)
        assert (grad[t + 1 :] == 0).all()
        assert (grad[: t + 1] > 0).all()


def test_sliding_window_sees_nothing_outside_the_window():
    torch.manual_seed(0)
    window, layers = 3, 2
    model = build_model(tiny(family="decoder", position="rope", sliding_window=window, n_layers=layers))
    ids = torch.randint(0, 61, (1, 16))
    t = 12
    grad = _input_gradients(model, ids, t)
    reach = layers * (window - 1)  # each layer moves information at most window-1 tokens back
    assert (grad[: t - reach] == 0).all()
    assert (grad[t - reach : t + 1] > 0).all()
    assert (grad[t + 1 :] == 0).all()


def test_local_global_interleaving_lets_global_layers_see_everything():
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", sliding_window=2, global_every=2, n_layers=2))
    ids = torch.randint(0, 61, (1, 16))
    grad = _input_gradients(model, ids, 15)
    assert (grad[:16] > 0).all()  # layer 2 is global


@pytest.mark.parametrize("position", POSITIONS)
def test_encoder_is_bidirectional(position):
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder", position=position))
    ids = torch.randint(0, 61, (1, 10))
    assert (_input_gradients(model, ids, 0) > 0).all()  # the first token sees the last


@pytest.mark.parametrize("family", ["encoder", "decoder"])
@pytest.mark.parametrize("position", POSITIONS)
def test_padding_does_not_change_real_tokens(family, position):
    torch.manual_seed(0)
    model = build_model(tiny(family=family, position=position)).eval()
    ids = torch.randint(1, 61, (1, 9))
    alone = model(ids).logits
    pad = torch.zeros(1, 4, dtype=torch.long)
    right = model(torch.cat([ids, pad], 1), torch.cat([torch.ones_like(ids), pad], 1)).logits[:, :9]
    torch.testing.assert_close(right, alone, atol=1e-5, rtol=1e-5)
    if family == "decoder":  # left padding, as in batched generation
        left = model(torch.cat([pad, ids], 1), torch.cat([pad, torch.ones_like(ids)], 1)).logits[:, 4:]
        torch.testing.assert_close(left, alone, atol=1e-5, rtol=1e-5)


def test_encoder_decoder_source_padding_does_not_change_target_outputs():
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder_decoder", position="relative")).eval()
    src, tgt = torch.randint(1, 61, (1, 7)), torch.randint(1, 61, (1, 5))
    alone = model(src, None, tgt).logits
    padded_src = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], 1)
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 3)], 1).long()
    torch.testing.assert_close(model(padded_src, mask, tgt).logits, alone, atol=1e-5, rtol=1e-5)


def test_mask_predicates():
    idx = torch.arange(4)
    causal = self_attention_mask(idx, idx, causal=True)[0, 0]
    assert torch.equal(causal, torch.ones(4, 4, dtype=torch.bool).tril())
    window = self_attention_mask(idx, idx, causal=True, window=2)[0, 0]
    assert window.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    padded = self_attention_mask(idx, idx, causal=False, key_valid=torch.tensor([[1, 1, 1, 0]]))[0, 0]
    assert padded.int().tolist() == [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
