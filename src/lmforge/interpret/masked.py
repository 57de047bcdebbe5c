"""Windows of the encoded test split for an encoder: packed as in MLM pretraining ([CLS] block [SEP]),
and the same windows with a fixed share of their tokens selected as BERT does (80% [MASK], 10% a
random token, 10% kept), each window drawn by its own seeded generator, so every checkpoint is read
on the same corrupted windows."""

from __future__ import annotations

from pathlib import Path

import torch

from lmforge.data.datasets import PackedDataset
from lmforge.data.encoded import EncodedSplit
from lmforge.errors import DataError
from lmforge.objectives.collate import MLMCollator
from lmforge.tokenizer.specials import SpecialTokens


def masked_windows(
    encoded_dir: Path,
    length: int,
    specials: SpecialTokens,
    vocab_size: int,
    rate: float,
    limit: int | None,
    batch: int,
    seed: int,
) -> tuple[list[torch.Tensor], list[dict[str, torch.Tensor]]]:
    """(windows, masked): the clean windows, batched (B, length); and per batch the corrupted
    `input_ids`, `attention_mask` and `labels` (-100 except at the selected positions)."""
    if specials.mask is None or specials.cls is None or specials.sep is None:
        raise DataError(
            f"interpret: the tokenizer of {encoded_dir} has no [MASK]/[CLS]/[SEP], expected the encoder's WordPiece"
        )
    data = PackedDataset(
        EncodedSplit(encoded_dir, "test"),
        length,
        eos_id=specials.sep,
        cls_id=specials.cls,
        sep_id=specials.sep,
    )
    items = [data[i] for i in range(len(data) if limit is None else min(limit, len(data)))]
    special_ids = [specials.pad, specials.unk, specials.cls, specials.sep, specials.mask, *specials.sentinels]
    collate = MLMCollator(specials.pad, specials.mask, vocab_size, special_ids, rate, seed=seed)
    chunks = [items[i : i + batch] for i in range(0, len(items), batch)]
    windows = [torch.stack([item["input_ids"] for item in chunk]) for chunk in chunks]
    return windows, [collate(chunk) for chunk in chunks]
