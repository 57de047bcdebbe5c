"""The encode stage: token arrays and offsets round-trip to the tokenizer's own ids."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf
from tokenizers import Tokenizer

from helpers import entry_stage
from lmforge.data.documents import SPLITS, Document, read_split, write_prepared
from lmforge.data.encoded import EncodedSplit, token_dtype
from lmforge.encoding import encode as encode_module
from lmforge.errors import DataError
from lmforge.tokenizer import load_tokenizer


@pytest.fixture(params=["wordpiece", "bpe"])
def encoded_cfg(request, tmp_path: Path) -> DictConfig:
    """Tiny prepared splits and a tokenizer of the parametrised kind trained on them."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    splits = {}
    for i, split in enumerate(SPLITS):
        splits[split] = [
            Document(
                f"{split}{d}",
                "test",
                tuple(
                    " ".join(words[(d + s + k) % 12] for k in range(3 + s)) + "." for s in range(d % 4 + 1)
                ),
            )
            for d in range(6 + i)
        ]
    write_prepared(tmp_path / "prepared", splits)
    cfg = OmegaConf.create(
        {
            "data": {"prepared_dir": str(tmp_path / "prepared")},
            "tokenizer": {
                "name": request.param,
                "kind": request.param,
                "vocab_size": 300,
                "min_frequency": 1,
                "n_sentinels": 3,
                "dir": str(tmp_path / "tok"),
                "reports_dir": str(tmp_path / "rep"),
                "encoded_dir": str(tmp_path / "encoded"),
            },
        }
    )
    entry_stage("train_tokenizer")(cfg)
    return cfg


def test_encoded_arrays_round_trip_to_token_ids(encoded_cfg):
    result = entry_stage("encode")(encoded_cfg)
    name = encoded_cfg.tokenizer.name
    tok = load_tokenizer(Path(encoded_cfg.tokenizer.dir) / name)
    out = Path(encoded_cfg.tokenizer.encoded_dir) / name
    meta = json.loads((out / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == tok.get_vocab_size()
    assert meta["special_ids"]["pad"] == 0 and len(meta["special_ids"]["sentinels"]) == 3
    for split in SPLITS:
        enc = EncodedSplit(out, split)
        docs = list(read_split(encoded_cfg.data.prepared_dir, split))
        assert isinstance(enc.tokens, np.memmap) and enc.n_documents == len(docs)
        assert meta["splits"][split] == {
            "documents": enc.n_documents,
            "sentences": len(enc.sentence_offsets) - 1,
            "tokens": enc.n_tokens,
        }
        sentence = 0
        for d, doc in enumerate(docs):
            expected = [tok.encode(s, add_special_tokens=False).ids for s in doc.sentences]
            assert list(enc.sentence_range(d)) == list(range(sentence, sentence + len(expected)))
            offsets = enc.sentence_offsets
            assert [
                enc.tokens[offsets[i] : offsets[i + 1]].tolist() for i in enc.sentence_range(d)
            ] == expected
            starts = enc.document_token_offsets()
            assert enc.tokens[starts[d] : starts[d + 1]].tolist() == [t for ids in expected for t in ids]
            sentence += len(expected)
    assert result.metrics["encode/train_documents"] == 6
    assert str(out / "meta.json") in result.artifacts and len(result.artifacts) == 10


def test_token_dtype_follows_vocab_size():
    assert token_dtype(65535) == np.uint16 and token_dtype(65536) == np.uint32


def test_missing_or_inconsistent_encoded_split_is_a_data_error(encoded_cfg):
    entry_stage("encode")(encoded_cfg)
    out = Path(encoded_cfg.tokenizer.encoded_dir) / encoded_cfg.tokenizer.name
    with pytest.raises(DataError, match="expected an encoded split"):
        EncodedSplit(out, "dev")
    (out / "val.bin").write_bytes((out / "val.bin").read_bytes()[:-2])
    with pytest.raises(DataError, match="re-encode"):
        EncodedSplit(out, "val")


def test_encode_without_tokenizer_is_a_data_error(encoded_cfg, tmp_path):
    encoded_cfg.tokenizer.dir = str(tmp_path / "nowhere")
    with pytest.raises(DataError, match="run the tokenizer stage first"):
        entry_stage("encode")(encoded_cfg)


def _encoded_bytes(cfg) -> dict[str, bytes]:
    out = Path(cfg.tokenizer.encoded_dir) / cfg.tokenizer.name
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_every_core_and_any_batch_size_give_the_same_ids(encoded_cfg, monkeypatch):
    """The stage turns `tokenizers`' thread pool on for itself and encodes the next batch while it
    writes the last: the files are those of one thread, one sentence a batch, and the caller's
    setting is back afterwards."""
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    seen = []

    class Spy:  # the stage's tokenizer, noting the setting each encode_batch_fast call ran under
        def __init__(self, tokenizer: Tokenizer) -> None:
            self.tokenizer = tokenizer

        def __getattr__(self, name: str):
            return getattr(self.tokenizer, name)

        def encode_batch_fast(self, *args, **kwargs):
            seen.append(os.environ.get("TOKENIZERS_PARALLELISM"))
            return self.tokenizer.encode_batch_fast(*args, **kwargs)

    monkeypatch.setattr(encode_module, "load_tokenizer", lambda path: Spy(load_tokenizer(path)))
    entry_stage("encode")(encoded_cfg)
    assert set(seen) == {"true"} and os.environ["TOKENIZERS_PARALLELISM"] == "false"
    every_core = _encoded_bytes(encoded_cfg)

    monkeypatch.setattr(encode_module, "every_core", contextlib.nullcontext)  # one thread
    encoded_cfg.tokenizer.batch_size = 1  # one sentence a batch: many batches in flight one after another
    entry_stage("encode")(encoded_cfg)
    assert _encoded_bytes(encoded_cfg) == every_core
    assert len(seen) > 2 * len(SPLITS)
