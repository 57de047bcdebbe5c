"""Sampling: greedy, temperature, top-k, top-p, EOS handling, batch shapes and bad arguments."""

from __future__ import annotations

import pytest
import torch

from helpers import tiny
from lmforge.errors import ConfigError
from lmforge.model import build_model, generate
from lmforge.model.generation import filter_logits, sample_next


def test_top_k_keeps_the_k_largest():
    logits = torch.tensor([[1.0, 5.0, 3.0, 4.0, 2.0]])
    kept = filter_logits(logits, top_k=2).isfinite()
    assert kept.tolist() == [[False, True, False, True, False]]


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log()
    assert filter_logits(logits, top_p=0.5).isfinite().tolist() == [[True, False, False, False]]
    assert filter_logits(logits, top_p=0.8).isfinite().tolist() == [[True, True, False, False]]
    assert filter_logits(logits, top_p=0.81).isfinite().tolist() == [[True, True, True, False]]
    assert filter_logits(logits[:, [2, 0, 3, 1]], top_p=0.8).isfinite().tolist() == [
        [False, True, False, True]
    ]


def test_temperature_zero_is_greedy_and_sampling_follows_the_distribution():
    logits = torch.tensor([[0.0, 2.0, 1.0]])
    assert sample_next(logits, temperature=0).item() == 1
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_next(logits, 1.0, generator=g) for _ in range(4000)])
    freq = torch.bincount(draws.flatten(), minlength=3) / 4000
    torch.testing.assert_close(freq, logits.softmax(-1)[0], atol=0.03, rtol=0)
    cold = torch.stack([sample_next(logits, 0.2, generator=g) for _ in range(500)])
    assert (cold == 1).float().mean() > 0.95  # low temperature sharpens


def test_generate_stops_rows_at_eos_and_pads_after():
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder")).eval()
    prompt = torch.randint(1, 61, (4, 3))
    free = generate(model, prompt, max_new_tokens=6, temperature=0)
    eos = free[0, 4].item()  # make the second generated token of row 0 the EOS
    out = generate(model, prompt, max_new_tokens=6, temperature=0, eos_token_id=eos, pad_token_id=0)
    row = out[0, 3:].tolist()
    stop = row.index(eos)
    assert all(t == 0 for t in row[stop + 1 :])
    assert out.shape[0] == 4 and out.shape[1] <= 9


def test_generate_is_reproducible_with_a_generator():
    model = build_model(tiny(family="decoder")).eval()
    prompt = torch.randint(1, 61, (2, 3))
    runs = [
        generate(
            model, prompt, max_new_tokens=8, top_k=10, top_p=0.9, generator=torch.Generator().manual_seed(7)
        )
        for _ in range(2)
    ]
    assert torch.equal(*runs)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"temperature": -1}, "temperature: got -1"),
        ({"top_k": 0}, "top_k: got 0"),
        ({"top_p": 1.5}, "top_p: got 1.5"),
    ],
)
def test_bad_sampling_arguments(kwargs, needle):
    model = build_model(tiny(family="decoder"))
    with pytest.raises(ConfigError, match=needle):
        generate(model, torch.ones(1, 2, dtype=torch.long), **kwargs)


def test_encoder_cannot_generate():
    with pytest.raises(ConfigError, match="encoder"):
        generate(build_model(tiny(family="encoder")), torch.ones(1, 2, dtype=torch.long))
