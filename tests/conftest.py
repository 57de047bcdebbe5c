"""Test-wide settings: two threads at most (one when OMP_NUM_THREADS says so), no tokenizer thread
pools in forked workers; and a tiny workspace shared by the stage tests: a generated local corpus,
prepared, tokenized and encoded by the real stages, with every output path relative to the
workspace (the stages use relative paths, as under DVC)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from helpers import entry_stage, stage_config, write_corpus

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# `make test` runs two pytest processes side by side with OMP_NUM_THREADS=1: keep to it, and to 2 at most
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1, int(os.environ.get("OMP_NUM_THREADS") or 2))))


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    write_corpus(root / "corpus")
    previous = os.getcwd()
    os.chdir(root)
    try:
        entry_stage("prepare")(stage_config())
        for name in ("wordpiece", "bpe"):
            entry_stage("train_tokenizer")(stage_config(f"tokenizer={name}", "tokenizer.vocab_size=600"))
            entry_stage("encode")(stage_config(f"tokenizer={name}", "tokenizer.vocab_size=600"))
    finally:
        os.chdir(previous)
    return root


@pytest.fixture
def in_workspace(workspace, monkeypatch) -> Path:
    monkeypatch.chdir(workspace)
    return workspace
