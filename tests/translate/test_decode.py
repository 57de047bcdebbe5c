"""Greedy and beam search: a toy model whose best sequence is known, beam 1 == greedy, batched ==
unbatched, length limits and bad arguments; evaluation's sources encoded once for every beam size."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from helpers import tiny
from lmforge.errors import ConfigError
from lmforge.model import build_model
from lmforge.model.components.kv_cache import KVCache, LayerCache
from lmforge.model.config import Family
from lmforge.tokenizer.specials import SpecialTokens
from lmforge.translate import evaluate
from lmforge.translate.config import DecodeConfig, LongPairs
from lmforge.translate.decode import beam_search, greedy, length_penalty, translate_batch
from lmforge.translate.pairs import Pair

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


class WordIds:
    """A 'tokenizer' whose words are token ids: "5 9 3" <-> [5, 9, 3]."""

    def encode_batch(self, texts, add_special_tokens=False):
        return [SimpleNamespace(ids=[int(w) for w in t.split()]) for t in texts]

    def decode(self, ids):
        return " ".join(map(str, ids))


def test_every_beam_size_decodes_the_sources_encoded_once_as_one_sentence_at_a_time_would(monkeypatch):
    torch.manual_seed(0)
    config = tiny(family="encoder_decoder", n_encoder_layers=2, vocab_size=40, dropout=0.0)
    model = build_model(config).double().eval()
    with torch.no_grad():  # sharp next-token choices, none of them EOS: hypotheses of several tokens
        weight = model.encoder_embeddings.tok.weight  # tied: also the output projection
        weight.mul_(20.0)
        weight[EOS] = 0.0
    g = torch.Generator().manual_seed(3)
    sources = [torch.randint(3, 40, (n,), generator=g).tolist() for n in (5, 2, 7, 3, 6)]
    pairs = [Pair(str(i), "", " ".join(map(str, s)), "") for i, s in enumerate(sources)]
    specials = SpecialTokens(pad=0, unk=None, cls=None, sep=None, mask=None, eos=EOS, bos=EOS, sentinels=())
    decode, beams = DecodeConfig(max_len_b=3, batch_size=2), (1, 3)
    calls = Counter()
    encode, translate = evaluate.encode_pairs, evaluate.translate_batch
    monkeypatch.setattr(evaluate, "encode_pairs", lambda *a, **k: calls.update(["encode"]) or encode(*a, **k))
    monkeypatch.setattr(
        evaluate, "translate_batch", lambda *a, **k: calls.update([k["beam_size"]]) or translate(*a, **k)
    )

    batches = evaluate.source_batches(WordIds(), pairs, specials, config.max_seq_len, LongPairs.truncate, 2)
    decoded = {beam: evaluate.decode_all(model, WordIds(), batches, specials, decode, beam) for beam in beams}
    assert calls == {"encode": 1, 1: 3, 3: 3}  # 5 sentences in 3 batches: one pass over them per beam size

    limits = dict(alpha=decode.length_penalty, max_len_a=decode.max_len_a, max_len_b=decode.max_len_b)
    for beam in beams:
        alone = []
        for source in sources:
            ids = torch.tensor([[*source, EOS]])
            hyp = translate_batch(
                model, ids, torch.ones_like(ids), bos=EOS, eos=EOS, pad=0, beam_size=beam, **limits
            )
            alone.append(WordIds().decode(hyp[0]))
        assert decoded[beam].hypotheses == alone  # in the order of the pairs, not of the length batches
        assert all(alone)
