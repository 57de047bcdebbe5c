"""Special-token layouts of the two tokenizers, loading a saved tokenizer, and reading its special ids.

WordPiece: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 <extra_id_0>=5 ...
BPE:       <pad>=0 <|endoftext|>=1 <extra_id_0>=2 ...

Raw text never yields a special id: every tokenizer we train or load encodes the strings
"[MASK]", "<|endoftext|>", "<extra_id_0>", ... found in text as ordinary text (`text_only`), so
a corpus cannot inject control tokens; datasets and post-processors add specials by id.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from lmforge.errors import DataError

WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
BPE_SPECIALS = ("<pad>", "<|endoftext|>")


def sentinel(i: int) -> str:
    return f"<extra_id_{i}>"


def special_tokens(base: tuple[str, ...], n_sentinels: int) -> list[str]:
    """The special tokens in id order: the base layout, then the sentinels."""
    return list(base) + [sentinel(i) for i in range(n_sentinels)]


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of the special tokens; None where the tokenizer has no such token."""

    pad: int  # padding (ignored by attention and losses)
    unk: int | None  # unknown piece (WordPiece only; byte-level BPE covers every byte)
    cls: int | None  # [CLS]: start of a BERT input; also `bos` for WordPiece
    sep: int | None  # [SEP]: ends each BERT segment; also `eos` for WordPiece
    mask: int | None  # [MASK] for masked language modelling (WordPiece only)
    eos: int  # end of document: <|endoftext|> (BPE) or [SEP] (WordPiece)
    bos: int  # start of document: <|endoftext|> (BPE) or [CLS] (WordPiece)
    sentinels: tuple[int, ...]  # <extra_id_0>, <extra_id_1>, ... for span corruption

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["sentinels"] = list(self.sentinels)
        return out


def text_only(tokenizer: Tokenizer) -> Tokenizer:
    """Encode special-token strings in input text as plain text. The flag is not saved in
    tokenizer.json, so it is set on every tokenizer we train or load."""
    tokenizer.encode_special_tokens = True
    return tokenizer


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """A saved tokenizer from its `tokenizer.json` or from the folder holding it."""
    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise DataError(f"tokenizer file {path} does not exist; run the tokenizer stage first")
    try:
        return text_only(Tokenizer.from_file(str(path)))
    except Exception as err:  # tokenizers raises a bare Exception on a malformed file
        raise DataError(f"{path} is not a valid tokenizer.json ({str(err).splitlines()[0]})") from None


def special_token_ids(tokenizer: Tokenizer) -> SpecialTokens:
    """Read the special ids of a WordPiece or BPE tokenizer built by `lmforge.tokenizer.builders`."""
    ids = {token: tokenizer.token_to_id(token) for token in WORDPIECE_SPECIALS + BPE_SPECIALS}
    sentinels = []
    while (sid := tokenizer.token_to_id(sentinel(len(sentinels)))) is not None:
        sentinels.append(sid)
    if ids["[PAD]"] is not None and ids["[CLS]"] is not None and ids["[SEP]"] is not None:
        return SpecialTokens(
            pad=ids["[PAD]"],
            unk=ids["[UNK]"],
            cls=ids["[CLS]"],
            sep=ids["[SEP]"],
            mask=ids["[MASK]"],
            eos=ids["[SEP]"],
            bos=ids["[CLS]"],
            sentinels=tuple(sentinels),
        )
    if ids["<pad>"] is not None and ids["<|endoftext|>"] is not None:
        eot = ids["<|endoftext|>"]
        return SpecialTokens(
            pad=ids["<pad>"],
            unk=None,
            cls=None,
            sep=None,
            mask=None,
            eos=eot,
            bos=eot,
            sentinels=tuple(sentinels),
        )
    raise DataError(
        "tokenizer has neither [PAD]/[CLS]/[SEP] nor <pad>/<|endoftext|>; expected one built by lmforge"
    )
