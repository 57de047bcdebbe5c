"""Test-wide settings: two threads at most, no tokenizer thread pools in forked workers; and a tiny
workspace shared by the stage tests: a generated local corpus, prepared, tokenized and encoded by the
real stages, with every output path relative to the workspace (the stages use relative paths, as
under DVC)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from helpers import stage_config, write_corpus
from lmforge.data import prepare
from lmforge.encoding import encode
from lmforge.tokenizer import train as train_tokenizer

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    write_corpus(root / "corpus")
    previous = os.getcwd()
    os.chdir(root)
    try:
        prepare.run(stage_config())
        for name in ("wordpiece", "bpe"):
            train_tokenizer.run(stage_config(f"tokenizer={name}", "tokenizer.vocab_size=600"))
            encode.run(stage_config(f"tokenizer={name}", "tokenizer.vocab_size=600"))
    finally:
        os.chdir(previous)
    return root


@pytest.fixture
def in_workspace(workspace, monkeypatch) -> Path:
    monkeypatch.chdir(workspace)
    return workspace
