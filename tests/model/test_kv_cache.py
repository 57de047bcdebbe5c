"""KV-cache decoding equals the full forward pass, for every position type, GQA/MQA, sliding window
and the encoder-decoder."""

from __future__ import annotations

import pytest
import torch

from helpers import tiny
from lmforge.model import build_model, generate

CASES = {
    "learned": dict(position="learned"),
    "sinusoidal": dict(position="sinusoidal", scale_embeddings=True),
    "rope": dict(position="rope"),
    "alibi": dict(position="alibi"),
    "relative": dict(position="relative"),
    "none": dict(position="none"),
    "gqa": dict(position="rope", n_kv_heads=2),
    "mqa": dict(position="rope", n_kv_heads=1),
    "sliding": dict(position="rope", sliding_window=4),
    "local_global": dict(position="alibi", sliding_window=3, global_every=2),
    "post_norm": dict(position="learned", norm_placement="post", final_norm=False),
}


@pytest.mark.parametrize("case", CASES)
def test_decoder_incremental_logits_equal_full_forward(case):
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", **CASES[case])).eval()
    ids = torch.randint(0, 61, (2, 14))
    full = model(ids).logits
    cache = model.init_cache(2, 14)
    steps = [model(ids[:, :5], cache=cache).logits]  # prefill 5, then one token at a time
    steps += [model(ids[:, t : t + 1], cache=cache).logits for t in range(5, 14)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", ["learned", "rope", "relative", "gqa", "sinusoidal"])
def test_encoder_decoder_incremental_logits_equal_full_forward(case):
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder_decoder", **CASES[case])).eval()
    src, tgt = torch.randint(0, 61, (2, 9)), torch.randint(0, 61, (2, 8))
    src_mask = torch.ones_like(src)
    src_mask[1, 6:] = 0
    full = model(src, src_mask, tgt).logits
    memory = model.encode(src, src_mask).last_hidden_state
    cache = model.init_cache(2, 8, memory_len=9)
    steps = [model(None, src_mask, tgt[:, t : t + 1], memory=memory, cache=cache).logits for t in range(8)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", ["learned", "rope", "alibi", "gqa", "sliding"])
def test_cached_generation_equals_uncached_with_left_padding(case):
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", **CASES[case])).eval()
    prompts = torch.randint(1, 61, (2, 6))
    mask = torch.ones_like(prompts)
    prompts[0, :2], mask[0, :2] = 0, 0  # the first prompt is 4 tokens, left-padded
    kwargs = dict(attention_mask=mask, max_new_tokens=10, temperature=0)
    cached = generate(model, prompts, **kwargs)
    uncached = generate(model, prompts, use_cache=False, **kwargs)
    assert torch.equal(cached, uncached)
    alone = generate(model, prompts[:1, 2:], max_new_tokens=10, temperature=0)
    assert torch.equal(cached[0, 2:], alone[0])  # padding changes nothing


def test_encoder_decoder_cached_generation_equals_uncached():
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder_decoder", position="relative")).eval()
    src = torch.randint(1, 61, (3, 7))
    kwargs = dict(max_new_tokens=9, temperature=0, decoder_start_token_id=0)
    assert torch.equal(generate(model, src, **kwargs), generate(model, src, use_cache=False, **kwargs))
