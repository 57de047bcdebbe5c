"""Intrinsic tokenizer quality on held-out text: vocab size, tokens per word, bytes per token, UNK rate.

The statistics read a bounded sample, the first `SAMPLE_BYTES` of sentence text of the split (whole
sentences, in file order: the split is already a seeded sample of documents), encoded a batch at a
time, so their time and memory stay flat as the corpus grows. The report says how much it read.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from tokenizers import Tokenizer

from lmforge.errors import DataError
from lmforge.tokenizer.specials import special_token_ids

SAMPLE_BYTES = 8 << 20  # 8 MiB: ~1.5M words; Brown's val split (0.3 MB) is read whole
BATCH = 1000  # sentences per encode_batch call


def tokenizer_stats(
    tokenizer: Tokenizer, sentences: Iterable[str], sample_bytes: int = SAMPLE_BYTES
) -> dict[str, float]:
    """Stats of the first `sample_bytes` of `sentences` (whole sentences) encoded without special
    tokens; words are whitespace-separated. `sample_complete` is 1 when every sentence was read."""
    unk = special_token_ids(tokenizer).unk
    n_sentences = n_tokens = n_words = n_bytes = n_unk = 0
    stream = iter(sentences)
    complete = True
    while batch := list(islice(stream, BATCH)):
        for encoding, sentence in zip(tokenizer.encode_batch(batch, add_special_tokens=False), batch):
            if n_bytes >= sample_bytes:
                complete = False
                break
            n_sentences += 1
            n_tokens += len(encoding.ids)
            n_words += len(sentence.split())
            n_bytes += len(sentence.encode("utf-8"))
            n_unk += 0 if unk is None else encoding.ids.count(unk)
        if not complete:
            break
    if not n_sentences:
        raise DataError("no sentences to measure the tokenizer on; expected a non-empty val split")
    return {
        "vocab_size": tokenizer.get_vocab_size(),
        "tokens": n_tokens,
        "tokens_per_word": n_tokens / max(n_words, 1),
        "bytes_per_token": n_bytes / max(n_tokens, 1),
        "unk_rate": n_unk / max(n_tokens, 1),
        "sample_sentences": n_sentences,
        "sample_bytes": n_bytes,
        "sample_complete": int(complete),
    }
