"""Greedy and beam search: a toy model whose best sequence is known, beam 1 == greedy, batched ==
unbatched, length limits and bad arguments."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest
import torch

from helpers import tiny
from lmforge.config import Family
from lmforge.errors import ConfigError
from lmforge.model import build_model
from lmforge.model.components.kv_cache import KVCache, LayerCache
from lmforge.translate.decode import beam_search, greedy, length_penalty

BOS = EOS = 1
A, B, C = 2, 3, 4


class TableModel(torch.nn.Module):
    """Next-token log-probabilities looked up from the whole target prefix, which it keeps in the KV
    cache (so a beam search that forgets to reorder the cache reads the wrong prefix)."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab: int = 5, max_seq_len: int = 16):
        super().__init__()
        self.table, self.vocab = table, vocab
        self.config = SimpleNamespace(family=Family.encoder_decoder, max_seq_len=max_seq_len)

    def encode(self, input_ids, attention_mask=None):
        return SimpleNamespace(last_hidden_state=torch.zeros(*input_ids.shape, 1))

    def init_cache(self, batch, max_len, memory_len, device=None, dtype=None):
        return [LayerCache(KVCache(batch, 1, max_len, 1, dtype=torch.float64))]

    def forward(
        self, input_ids, attention_mask=None, decoder_input_ids=None, *, memory=None, cache=None, **_
    ):
        k, _ = cache[0].self_attn.update(
            decoder_input_ids[:, None, :, None].double(), decoder_input_ids[:, None, :, None].double()
        )
        logits = torch.full((k.shape[0], 1, self.vocab), -1e9)
        for row, prefix in enumerate(k[:, 0, :, 0].long().tolist()):
            for token, p in self.table.get(tuple(prefix[1:]), {EOS: 1.0}).items():  # past the start token
                logits[row, 0, token] = math.log(p)
        return SimpleNamespace(logits=logits)


# Greedy takes A (0.6) and then spreads over three tokens; B (0.4) is followed by EOS at 0.9.
TRAP = {
    (): {A: 0.6, B: 0.4},
    (A,): {A: 0.34, B: 0.33, C: 0.33},
    (A, A): {EOS: 1.0},
    (A, B): {EOS: 1.0},
    (A, C): {EOS: 1.0},
    (B,): {EOS: 0.9, C: 0.1},
    (B, C): {EOS: 1.0},
}


def _src(n_rows: int = 1, length: int = 3):
    return torch.full((n_rows, length), 7), torch.ones(n_rows, length, dtype=torch.long)


def _best_by_enumeration(table, alpha, max_len):
    """Exhaustive search over every sequence ending in EOS within max_len tokens."""
    best, best_score = None, -math.inf
    for n in range(max_len):
        for body in itertools.product([A, B, C], repeat=n):
            logp, prefix = 0.0, ()
            for token in (*body, EOS):
                p = table.get(prefix, {EOS: 1.0}).get(token, 0.0)
                if p == 0.0:
                    break
                logp += math.log(p)
                prefix = (*prefix, token)
            else:
                score = logp / length_penalty(n + 1, alpha)
                if score > best_score:
                    best, best_score = list(body), score
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_beam_search_finds_the_known_best_sequence_that_greedy_misses(alpha):
    model = TableModel(TRAP)
    ids, mask = _src()
    expected = _best_by_enumeration(TRAP, alpha, 4)
    assert expected == [B]  # log 0.4 + log 0.9 beats log 0.6 + log 0.34 at any alpha here
    assert beam_search(model, ids, mask, bos=BOS, eos=EOS, beam_size=2, alpha=alpha, max_len_b=4) == [[B]]
    assert greedy(model, ids, mask, bos=BOS, eos=EOS, pad=0, max_len_b=4) == [[A, A]]


def test_beam_one_is_greedy_on_a_trained_shape_model():
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder_decoder", n_encoder_layers=2, vocab_size=40, dropout=0.0)).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 40, (6, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[2:, 6:] = 0  # some padded sources
    ids = ids.masked_fill(mask == 0, 0)
    beam = beam_search(model, ids, mask, bos=BOS, eos=EOS, beam_size=1, max_len_b=12)
    assert beam == greedy(model, ids, mask, bos=BOS, eos=EOS, pad=0, max_len_b=12)
    assert all(len(h) < n + 12 for h, n in zip(beam, mask.sum(-1).tolist()))  # source + 12, EOS included


def test_batched_beam_search_equals_one_sentence_at_a_time():
    torch.manual_seed(0)
    config = tiny(family="encoder_decoder", n_encoder_layers=2, vocab_size=40, dropout=0.0)
    model = build_model(config).double().eval()
    g = torch.Generator().manual_seed(2)
    lengths = [9, 4, 7, 2, 9]
    ids = torch.zeros(len(lengths), 9, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(3, 40, (n,), generator=g)
        mask[i, :n] = 1
    batched = beam_search(
        model, ids, mask, bos=BOS, eos=EOS, beam_size=3, alpha=0.6, max_len_a=1.0, max_len_b=5
    )
    alone = [
        beam_search(
            model,
            ids[i : i + 1, :n],
            mask[i : i + 1, :n],
            bos=BOS,
            eos=EOS,
            beam_size=3,
            alpha=0.6,
            max_len_a=1.0,
            max_len_b=5,
        )[0]
        for i, n in enumerate(lengths)
    ]
    assert batched == alone
    assert [len(h) < n + 5 for h, n in zip(batched, lengths)] == [True] * len(lengths)  # the length limit


def test_each_hypothesis_ends_at_its_own_eos():
    table = {(): {A: 0.5, B: 0.5}, (A,): {EOS: 1.0}, (B,): {C: 1.0}, (B, C): {EOS: 1.0}}
    model = TableModel(table)
    ids, mask = _src()
    # Both finish: "A" after 2 tokens (log .5), "B C" after 3 (log .5); the length penalty prefers the longer.
    assert beam_search(model, ids, mask, bos=BOS, eos=EOS, beam_size=2, alpha=1.0, max_len_b=6) == [[B, C]]
    assert beam_search(model, ids, mask, bos=BOS, eos=EOS, beam_size=2, alpha=0.0, max_len_b=6) in (
        [[A]],
        [[B, C]],
    )


def test_the_length_limit_forces_eos():
    table = {(): {A: 1.0}, (A,): {A: 1.0}, (A, A): {A: 1.0}, (A, A, A): {A: 1.0}}  # never ends by itself
    model = TableModel(table)
    ids, mask = _src(length=2)
    out = beam_search(model, ids, mask, bos=BOS, eos=EOS, beam_size=2, max_len_a=0.0, max_len_b=3)
    assert out == [[A, A]]  # 3 tokens at most, EOS included


@pytest.mark.parametrize(
    "kwargs, match", [({"beam_size": 0}, "beam_size"), ({"alpha": -0.1}, "length_penalty")]
)
def test_bad_beam_arguments_are_one_line_errors(kwargs, match):
    ids, mask = _src()
    with pytest.raises(ConfigError, match=match):
        beam_search(TableModel(TRAP), ids, mask, bos=BOS, eos=EOS, **kwargs)
