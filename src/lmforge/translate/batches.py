"""Token-count batches of sentence pairs (Vaswani et al. 2017, sec. 5.1: "batched together by
approximate sequence length ... approximately 25000 source tokens and 25000 target tokens").

Pairs are encoded once: source = tokens + EOS; decoder input = EOS (the start token) + tokens;
labels = tokens + EOS. `TokenBatches` sorts the pairs by length (ties broken by a seeded draw, so
each epoch's buckets differ), cuts the sorted order into batches whose padded size
`rows * (longest source + longest target)` stays within `max_tokens`, and shuffles the batches;
padding stays small because neighbours in the order have similar lengths. Epoch e draws with
seed (seed, e), so a run is reproducible. The draw only reorders pairs of equal (source, target)
lengths, so every epoch is cut at the same places: the number of batches is fixed by the lengths and
`max_tokens`, and `len()` is counted once.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import torch
from tokenizers import Tokenizer

from lmforge.errors import DataError
from lmforge.objectives.collate import pad
from lmforge.objectives.masking import IGNORE_INDEX
from lmforge.translate.config import LongPairs


class Encoded(NamedTuple):
    source: list[int]  # tokens + EOS
    target: list[int]  # tokens + EOS (the labels; the decoder input is EOS + tokens)


class Encoding(NamedTuple):
    pairs: list[Encoded]
    truncated: int  # pairs with a side cut to max_len


def encode_pairs(
    tokenizer: Tokenizer, pairs: Sequence, eos: int, max_len: int, long_pairs: LongPairs, split: str
) -> Encoding:
    """Each pair as ids; a side longer than `max_len` (EOS included) is cut or refused (`long_pairs`)."""
    sources = tokenizer.encode_batch([p.source for p in pairs], add_special_tokens=False)
    targets = tokenizer.encode_batch([p.target for p in pairs], add_special_tokens=False)
    out, truncated = [], 0
    for pair, src, tgt in zip(pairs, sources, targets):
        src_ids, tgt_ids = src.ids + [eos], tgt.ids + [eos]
        if max(len(src_ids), len(tgt_ids)) > max_len:
            if long_pairs is LongPairs.refuse:
                raise DataError(
                    f"{split} pair {pair.id}: {len(src_ids)} source and {len(tgt_ids)} target tokens with "
                    f"EOS, expected at most model.max_seq_len={max_len} (or translate.long_pairs=truncate)"
                )
            truncated += 1
            src_ids, tgt_ids = src_ids[: max_len - 1] + [eos], tgt_ids[: max_len - 1] + [eos]
        out.append(Encoded(src_ids, tgt_ids))
    return Encoding(out, truncated)


def token_batches(
    lengths: Sequence[tuple[int, int]], max_tokens: int, order: Sequence[int]
) -> list[list[int]]:
    """Cut `order` (indices into `lengths`) into consecutive batches of padded size <= max_tokens."""
    batches: list[list[int]] = []
    batch: list[int] = []
    longest_src = longest_tgt = 0
    for i in order:
        src, tgt = lengths[i]
        grown_src, grown_tgt = max(longest_src, src), max(longest_tgt, tgt)
        if batch and (len(batch) + 1) * (grown_src + grown_tgt) > max_tokens:
            batches.append(batch)
            batch, grown_src, grown_tgt = [], src, tgt
        batch.append(i)
        longest_src, longest_tgt = grown_src, grown_tgt
    if batch:
        batches.append(batch)
    return batches


class TokenBatches(torch.utils.data.Sampler[list[int]]):
    """A batch sampler of sort-by-length buckets, shuffled per epoch (or in length order, `shuffle=False`)."""

    def __init__(self, pairs: Sequence[Encoded], max_tokens: int, seed: int, shuffle: bool = True) -> None:
        self.lengths = [(len(p.source), len(p.target)) for p in pairs]
        longest = max(s + t for s, t in self.lengths)
        if longest > max_tokens:
            raise DataError(
                f"translate.max_tokens: got {max_tokens}, expected at least {longest} (the longest pair's "
                "source + target tokens)"
            )
        self.max_tokens, self.seed, self.shuffle, self.epoch = max_tokens, seed, shuffle, 0
        self.by_length = sorted(range(len(self.lengths)), key=lambda i: self.lengths[i])
        # Lightning asks len() before and after starting an epoch; both answers are this epoch's count
        # because the tie-breaking draw never moves a cut (see the module docstring).
        self.n_batches = len(token_batches(self.lengths, max_tokens, self.by_length))

    def _batches(self, epoch: int) -> list[list[int]]:
        if not self.shuffle:
            return token_batches(self.lengths, self.max_tokens, self.by_length)
        rng = random.Random(f"{self.seed}:{epoch}")
        ties = [rng.random() for _ in self.lengths]
        order = sorted(range(len(self.lengths)), key=lambda i: (self.lengths[i], ties[i]))
        batches = token_batches(self.lengths, self.max_tokens, order)
        rng.shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._batches(self.epoch)
        self.epoch += 1
        return iter(batches)

    def __len__(self) -> int:
        return self.n_batches


class PairCollator:
    """Right-padded tensors: input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, labels."""

    def __init__(self, pairs: Sequence[Encoded], pad: int, bos: int) -> None:
        self.pairs, self.pad, self.bos = pairs, pad, bos

    def __call__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        rows = [self.pairs[i] for i in indices]
        input_ids, attention_mask = pad([r.source for r in rows], self.pad)
        decoder_input_ids, decoder_mask = pad([[self.bos, *r.target[:-1]] for r in rows], self.pad)
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "decoder_input_ids": decoder_input_ids,
            "decoder_attention_mask": decoder_mask,
            "labels": pad([r.target for r in rows], IGNORE_INDEX)[0],
        }


def loader(pairs: Sequence[Encoded], max_tokens: int, pad: int, bos: int, seed: int, shuffle: bool):
    return torch.utils.data.DataLoader(
        list(range(len(pairs))),
        batch_sampler=TokenBatches(pairs, max_tokens, seed, shuffle),
        collate_fn=PairCollator(pairs, pad, bos),
    )
