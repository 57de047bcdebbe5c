"""Structured config of the `tokenizer` group, validated when the tokenizer and encode stages start."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from lmforge.errors import ConfigError
from lmforge.structured import Group, rooted


class Kind(str, Enum):
    wordpiece = "wordpiece"  # BERT (Devlin et al., 2019): BertPreTokenizer, "##" continuations, [CLS]/[SEP]
    bpe = "bpe"  # GPT-2 (Radford et al., 2019): byte-level BPE, no unknown token


@dataclass(frozen=True)
class TokenizerConfig:
    name: str = "wordpiece"  # names the output folders: {dir}/{name}/, {encoded_dir}/{name}/
    kind: Kind = Kind.wordpiece  # wordpiece | bpe
    vocab_size: int = 8192  # target size, special and sentinel tokens included
    min_frequency: int = 2  # a merge / piece must occur this often in the training text
    lowercase: bool = True  # WordPiece only: BERT-uncased style lowercasing and accent stripping
    n_sentinels: int = 100  # <extra_id_0..n-1> span-corruption sentinels (T5, Raffel et al., 2020)
    dir: str = rooted("artifacts/tokenizers", "${paths.artifacts}/tokenizers")  # {dir}/{name}/tokenizer.json
    encoded_dir: str = rooted("data/encoded", "${paths.data}/encoded")  # encode stage: {encoded_dir}/{name}/
    reports_dir: str = rooted("reports/tokenizer", "${paths.reports}/tokenizer")  # {reports_dir}/{name}.json
    batch_size: int = 1000  # sentences per batch when training / encoding
    # Train on at most this many MB of the train split: every k-th document, k the smallest that fits
    # (0: every document). The trainer's memory grows with the distinct words it counts, so a cap
    # keeps it flat however large the corpus (docs/data.md); smaller corpora are read whole.
    train_mb: float = 32.0

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigError(f"tokenizer.name={self.name!r}; expected a non-empty folder name without '/'")
        for key in ("vocab_size", "min_frequency", "batch_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"tokenizer.{key}={getattr(self, key)}; expected a positive integer")
        if self.train_mb < 0:
            raise ConfigError(f"tokenizer.train_mb={self.train_mb}; expected >= 0 (0: the whole train split)")
        if self.n_sentinels < 0:
            raise ConfigError(f"tokenizer.n_sentinels={self.n_sentinels}; expected >= 0")


def tokenizer_path(tokenizer_dir: str | Path, name: str) -> Path:
    """The saved tokenizer of `name` under `tokenizer_dir` (`tokenizer.dir`): {dir}/{name}/tokenizer.json."""
    return Path(tokenizer_dir) / name / "tokenizer.json"


tokenizer_config = Group(TokenizerConfig, "tokenizer")
