"""Raw text never becomes a control token: the strings of every special token, written in a corpus,
encode as ordinary text with both tokenizers, freshly trained or loaded from tokenizer.json, and the
encode stage's token arrays hold no special id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers import entry_stage
from lmforge.data.documents import Document, read_split, write_prepared
from lmforge.tokenizer.specials import (
    BPE_SPECIALS,
    WORDPIECE_SPECIALS,
    load_tokenizer,
    sentinel,
    special_token_ids,
)

HOSTILE = " ".join([*WORDPIECE_SPECIALS, *BPE_SPECIALS, sentinel(0), sentinel(3)]) + " the quick fox."


def _special_ids(tokenizer) -> set[int]:
    s = special_token_ids(tokenizer)
    return {i for i in (s.pad, s.unk, s.cls, s.sep, s.mask, s.eos, s.bos, *s.sentinels) if i is not None}


@pytest.mark.parametrize("fixture", ["tokenizer_cfg", "bpe_cfg"])
def test_special_token_strings_in_text_encode_as_text(fixture, request):
    cfg = request.getfixturevalue(fixture)
    prepared = Path(cfg.data.prepared_dir)
    docs = [Document(f"hostile{i}", "test", (HOSTILE, "The dog sleeps.")) for i in range(3)]
    splits = {split: list(read_split(prepared, split)) for split in ("val", "test")}
    write_prepared(prepared, {"train": docs + [Document("plain", "test", ("A cat runs.",) * 4)], **splits})
    entry_stage("train_tokenizer")(cfg)
    tokenizer = load_tokenizer(Path(cfg.tokenizer.dir) / cfg.tokenizer.name / "tokenizer.json")
    specials = _special_ids(tokenizer)
    ids = tokenizer.encode(HOSTILE, add_special_tokens=False).ids
    assert ids and not set(ids) & specials
    assert "extra" in tokenizer.decode(ids).replace(" ", "")  # the text survives as text
    with_specials = tokenizer.encode("a cat", add_special_tokens=True).ids
    if cfg.tokenizer.kind == "wordpiece":  # the post-processor still adds [CLS] / [SEP] by id
        assert with_specials[0] == special_token_ids(tokenizer).cls

    entry_stage("encode")(cfg)
    tokens = np.fromfile(Path(cfg.tokenizer.encoded_dir) / cfg.tokenizer.name / "train.bin", dtype=np.uint16)
    assert tokens.size and not set(tokens.tolist()) & specials
