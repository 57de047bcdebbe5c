"""Fixtures for the tokenizer tests: a tiny prepared corpus on disk and a config pointing at it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf

from lmforge.data.documents import SPLITS, Document, write_prepared

WORDS = (
    "the quick brown fox jumps over lazy dog while a clever cat sleeps near warm fire "
    "running runner runs ran jumping jumped happily unhappily caf\u00e9 na\u00efve"
).split()


def tiny_documents(n_docs: int, seed: int) -> list[Document]:
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n_docs):
        sentences = []
        for _ in range(4):
            words = rng.choice(WORDS, size=int(rng.integers(4, 10)))
            sentences.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", ", indeed."]))
        docs.append(Document(f"doc{seed}-{d}", "test", tuple(sentences)))
    return docs


@pytest.fixture
def tokenizer_cfg(tmp_path: Path) -> DictConfig:
    """A full config (data + tokenizer groups) whose prepared splits already exist."""
    prepared = tmp_path / "prepared"
    write_prepared(
        prepared,
        {split: tiny_documents(30 if split == "train" else 4, seed) for seed, split in enumerate(SPLITS)},
    )
    return OmegaConf.create(
        {
            "data": {"prepared_dir": str(prepared)},
            "tokenizer": {
                "name": "wp",
                "kind": "wordpiece",
                "vocab_size": 200,
                "min_frequency": 1,
                "n_sentinels": 4,
                "dir": str(tmp_path / "tokenizers"),
                "reports_dir": str(tmp_path / "reports"),
                "encoded_dir": str(tmp_path / "encoded"),
            },
        }
    )


@pytest.fixture
def bpe_cfg(tokenizer_cfg: DictConfig) -> DictConfig:
    cfg = tokenizer_cfg.copy()
    cfg.tokenizer.update({"name": "bpe", "kind": "bpe", "vocab_size": 300})
    return cfg
