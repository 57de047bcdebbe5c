"""Intrinsic tokenizer quality on held-out text: vocab size, tokens per word, bytes per token, UNK rate."""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer

from lmforge.errors import DataError
from lmforge.tokenizer.specials import special_token_ids


def tokenizer_stats(tokenizer: Tokenizer, sentences: Sequence[str]) -> dict[str, float]:
    """Stats of `sentences` encoded without special tokens; words are whitespace-separated."""
    if not sentences:
        raise DataError("no sentences to measure the tokenizer on; expected a non-empty val split")
    encodings = tokenizer.encode_batch(list(sentences), add_special_tokens=False)
    n_tokens = sum(len(e.ids) for e in encodings)
    n_words = sum(len(s.split()) for s in sentences)
    n_bytes = sum(len(s.encode("utf-8")) for s in sentences)
    unk = special_token_ids(tokenizer).unk
    n_unk = 0 if unk is None else sum(e.ids.count(unk) for e in encodings)
    return {
        "vocab_size": tokenizer.get_vocab_size(),
        "tokens": n_tokens,
        "tokens_per_word": n_tokens / max(n_words, 1),
        "bytes_per_token": n_bytes / max(n_tokens, 1),
        "unk_rate": n_unk / max(n_tokens, 1),
    }
