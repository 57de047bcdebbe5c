"""Structured configs of the translation stages: `pairs` (where the parallel text comes from and how
it is split) and `translate` (vocabulary, batching, loss, checkpoint averaging, decoding, evaluation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from lmforge.corpora.bible import Module
from lmforge.errors import ConfigError
from lmforge.stage import Plan, read, run_name_value
from lmforge.structured import CACHE, Group, rooted


class PairsSource(str, Enum):
    sword = "sword"  # two Debian SWORD Bible modules aligned by verse reference (pysword)
    local = "local"  # a two-column TSV: source<TAB>target, optionally a third column naming a group


@dataclass(frozen=True)
class LocalPairs:
    path: str | None = None  # the .tsv file; lines "source<TAB>target[<TAB>group]"


@dataclass(frozen=True)
class PairsConfig:
    name: str = "bible-en-es"  # recorded in the data card
    source: PairsSource = PairsSource.sword
    source_lang: str = "en"
    target_lang: str = "es"
    first: Module | None = None  # sword: the source-language module (package pin + SWORD module key)
    second: Module | None = None  # sword: the target-language module
    local: LocalPairs = field(default_factory=LocalPairs)
    # sword: whole books held out (test verses come from books never seen in training); local: the
    # groups of the third column, or with no third column a seeded share of the lines
    val_groups: list[str] = field(default_factory=list)
    test_groups: list[str] = field(default_factory=list)
    val_fraction: float = 0.03  # local without groups only
    test_fraction: float = 0.03
    seed: int = 0
    max_pairs: int | None = None  # keep the first N training pairs (smoke runs); val and test stay whole
    out_dir: str = rooted("data/translate", "${paths.data}/translate")  # output: {train,val,test}.tsv
    reports_dir: str = rooted("reports/translate", "${paths.reports}/translate")  # data_card.md, data.json
    cache_dir: str = rooted("~/.cache/lmforge", CACHE)
    licence: str = "unknown"  # local only: recorded in the data card

    def __post_init__(self) -> None:
        if self.source is PairsSource.local and not self.local.path:
            raise ConfigError("pairs.local.path is empty; expected a .tsv file for pairs.source=local")
        if self.source is PairsSource.sword and (self.first is None or self.second is None):
            raise ConfigError(
                "pairs.first / pairs.second: got none, expected both SWORD modules for source=sword"
            )
        for key in ("val_fraction", "test_fraction"):
            if not 0.0 <= getattr(self, key) < 0.5:
                raise ConfigError(f"pairs.{key}: got {getattr(self, key)}, expected a fraction in [0, 0.5)")
        if self.max_pairs is not None and self.max_pairs < 1:
            raise ConfigError(f"pairs.max_pairs: got {self.max_pairs}, expected null or an integer >= 1")
        overlap = set(self.val_groups) & set(self.test_groups)
        if overlap:
            raise ConfigError(
                f"pairs.val_groups and pairs.test_groups share {sorted(overlap)}; expected disjoint"
            )


class LongPairs(str, Enum):
    truncate = "truncate"  # cut to max_seq_len tokens and count the cut pairs in the report
    refuse = "refuse"  # stop with one line naming the first pair that is too long


@dataclass(frozen=True)
class DecodeConfig:
    beam_size: int = 4  # 1 is greedy (Vaswani et al.: 4)
    length_penalty: float = 0.6  # alpha of GNMT's ((5 + |Y|) / 6)^alpha (Vaswani et al.: 0.6)
    max_len_a: float = 1.0  # a hypothesis ends at a * source length + b tokens (the paper: + 50)
    max_len_b: int = 50
    batch_size: int = 64  # source sentences decoded together

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ConfigError(f"translate.decode.beam_size: got {self.beam_size}, expected an integer >= 1")
        if self.length_penalty < 0:
            raise ConfigError(
                f"translate.decode.length_penalty: got {self.length_penalty}, expected a number >= 0"
            )
        if self.batch_size < 1 or self.max_len_a < 0 or self.max_len_b < 1:
            raise ConfigError(
                "translate.decode: expected batch_size >= 1, max_len_a >= 0 and max_len_b >= 1, got "
                f"{self.batch_size}, {self.max_len_a}, {self.max_len_b}"
            )


@dataclass(frozen=True)
class TranslateConfig:
    vocab_size: int = 8000  # one byte-level BPE vocabulary learnt on both languages' training text
    min_frequency: int = 2
    max_tokens: int = 4096  # tokens per batch (source + target, padding included), sort-by-length buckets
    long_pairs: LongPairs = LongPairs.truncate  # a side longer than model.max_seq_len tokens
    label_smoothing: float = 0.1
    warmup: bool = True  # false: a constant rate at the Noam peak from step 1 (the warmup experiment)
    average_last: int = 1  # average the weights of the last k checkpoints (the paper: 5); 1 = none
    checkpoint_every: int = 100  # steps between the checkpoints that averaging reads
    # also write the averaged weights every `keep_every` steps before the last, as
    # {out_dir}/model_step{N}.ckpt (a multiple of checkpoint_every; the translate_length experiment
    # scores each); null keeps only the final model.ckpt
    keep_every: int | None = None
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    beam_sizes: list[int] = field(default_factory=lambda: [1, 2, 4, 8])  # BLEU against beam size
    test_examples: int | None = None  # decode only the first N test pairs (smoke runs)
    samples: int = 20  # translations shown in samples.md
    tokenizer_dir: str = "artifacts/translate/tokenizer"
    out_dir: str = "artifacts/translate/${run_name}"
    reports_dir: str = "reports/translate/${run_name}"

    def __post_init__(self) -> None:
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(
                f"translate.label_smoothing: got {self.label_smoothing}, expected a value in [0, 1)"
            )
        for key in (
            "vocab_size",
            "min_frequency",
            "max_tokens",
            "average_last",
            "checkpoint_every",
            "samples",
        ):
            if getattr(self, key) < 1:
                raise ConfigError(f"translate.{key}: got {getattr(self, key)}, expected an integer >= 1")
        if self.keep_every is not None and (self.keep_every < 1 or self.keep_every % self.checkpoint_every):
            raise ConfigError(
                f"translate.keep_every: got {self.keep_every}, expected null or a positive multiple of "
                f"translate.checkpoint_every={self.checkpoint_every}"
            )
        if not self.beam_sizes or min(self.beam_sizes) < 1:
            raise ConfigError(f"translate.beam_sizes: got {self.beam_sizes}, expected beam sizes >= 1")
        if self.test_examples is not None and self.test_examples < 1:
            raise ConfigError(f"translate.test_examples: got {self.test_examples}, expected null or >= 1")


def tokenizer_file(tokenizer_dir: str | Path) -> Path:
    """The joint vocabulary the translate_tokenizer stage writes and the other stages read."""
    return Path(tokenizer_dir) / "tokenizer.json"


pairs_config = Group(PairsConfig, "pairs")


translate_config = Group(TranslateConfig, "translate")


@dataclass(frozen=True, kw_only=True, eq=False)
class TranslateEvalPlan(Plan):
    """What `translate_eval` and `translate_length` read: the pairs, the trained model and the run."""

    pairs: PairsConfig = read(pairs_config)
    translate: TranslateConfig = read(translate_config)
    run_name: str = read(run_name_value)
