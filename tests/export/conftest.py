"""A small byte-level BPE tokenizer of ours, trained on a few sentences, for the export tests."""

from __future__ import annotations

import pytest

from lmforge.tokenizer.builders import build_bpe
from lmforge.tokenizer.config import Kind, TokenizerConfig

TEXT = [
    "The jury said that the city had no evidence that the election was fair.",
    "She opened the door, and then she opened the window, and the room was cold.",
] * 20


@pytest.fixture
def bpe_tokenizer_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    build_bpe(TokenizerConfig(name="bpe", kind=Kind.bpe, vocab_size=300, n_sentinels=4), [TEXT]).save(
        str(path)
    )
    return path
