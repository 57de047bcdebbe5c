"""The `translate_tokenizer` stage: one byte-level BPE vocabulary learnt on both sides of the training
pairs, shared by encoder input, decoder input and output projection (Vaswani et al. 2017, sec. 5.1).

Layout: <pad>=0, <|endoftext|>=1 (end of sentence, and the decoder's start token), then merges.
Output: {translate.tokenizer_dir}/tokenizer.json; {reports}/tokenizer.json with tokens per sentence.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from tokenizers import Tokenizer

from lmforge.io import atomic_path, write_json
from lmforge.stage import Plan, StageResult, read
from lmforge.tokenizer.builders import train_tokenizer
from lmforge.tokenizer.config import Kind, TokenizerConfig
from lmforge.tokenizer.specials import load_tokenizer
from lmforge.translate.config import (
    PairsConfig,
    TranslateConfig,
    pairs_config,
    tokenizer_file,
    translate_config,
)
from lmforge.translate.pairs import read_split


def learn(pairs: list, vocab_size: int, min_frequency: int) -> Tokenizer:
    cfg = TokenizerConfig(
        name="translate", kind=Kind.bpe, vocab_size=vocab_size, min_frequency=min_frequency, n_sentinels=0
    )
    texts = [p.source for p in pairs] + [p.target for p in pairs]
    return train_tokenizer(cfg, (texts[i : i + 1000] for i in range(0, len(texts), 1000)))


def lengths(tokenizer: Tokenizer, texts: list[str]) -> list[int]:
    return [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class VocabPlan(Plan):
    """The `translate_tokenizer` stage's plan."""

    pairs: PairsConfig = read(pairs_config)
    translate: TranslateConfig = read(translate_config)


def run(plan: VocabPlan) -> StageResult:
    pairs, translate = plan.pairs, plan.translate
    train = read_split(pairs.out_dir, "train")
    tokenizer = learn(train, translate.vocab_size, translate.min_frequency)
    path = tokenizer_file(translate.tokenizer_dir)
    with atomic_path(path) as tmp:
        tokenizer.save(str(tmp))
    tokenizer = load_tokenizer(path)
    val = read_split(pairs.out_dir, "val")
    metrics: dict[str, float] = {"vocab_size": tokenizer.get_vocab_size()}
    for side, lang in (("source", pairs.source_lang), ("target", pairs.target_lang)):
        texts = [getattr(p, side) for p in val]
        counts = lengths(tokenizer, texts)
        words = sum(len(t.split()) for t in texts)
        metrics[f"val_{lang}_tokens_per_sentence"] = statistics.mean(counts)
        metrics[f"val_{lang}_tokens_per_word"] = sum(counts) / max(words, 1)
    report = Path(pairs.reports_dir) / "tokenizer.json"
    write_json(report, metrics)
    return StageResult(metrics, [str(path), str(report)])
