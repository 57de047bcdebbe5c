"""Windows of the encoded test split, packed as in pretraining, for the measures that read real text."""

from __future__ import annotations

from pathlib import Path

import torch

from lmforge.data.datasets import PackedDataset
from lmforge.data.encoded import EncodedSplit


def text_windows(
    encoded_dir: Path, length: int, eos: int, limit: int | None, batch: int
) -> list[torch.Tensor]:
    """The test split packed as in pretraining (EOS between documents), cut into windows, batched."""
    data = PackedDataset(EncodedSplit(encoded_dir, "test"), length, eos_id=eos)
    n = len(data) if limit is None else min(limit, len(data))
    ids = torch.stack([data[i]["input_ids"] for i in range(n)])
    return list(ids.split(batch))
