"""Batches the real collators make for the tiny models of `helpers.tiny` (vocabulary of 61 ids)."""

from __future__ import annotations

import pytest
import torch

from lmforge.objectives import CausalLMCollator, MLMCollator

V = 61
PAD, EOS, MASK, CLS, SEP = 0, 1, 2, 3, 4


@pytest.fixture
def mlm_batch() -> dict[str, torch.Tensor]:
    """Three padded sentence pairs [CLS] A [SEP] B [SEP] with segments, NSP labels and 40% selected."""
    g = torch.Generator().manual_seed(2)
    items = []
    for i, (a, b) in enumerate([(4, 6), (7, 3), (3, 3)]):
        first, second = torch.randint(5, V, (a,), generator=g), torch.randint(5, V, (b,), generator=g)
        ids = torch.cat([torch.tensor([CLS]), first, torch.tensor([SEP]), second, torch.tensor([SEP])])
        segments = torch.tensor([0] * (a + 2) + [1] * (b + 1))
        items.append({"input_ids": ids, "index": i, "token_type_ids": segments, "nsp_label": i % 2})
    return MLMCollator(PAD, MASK, V, [PAD, EOS, MASK, CLS, SEP], mlm_probability=0.4)(items)


@pytest.fixture
def clm_batch() -> dict[str, torch.Tensor]:
    """Two sequences of 12 and 7 tokens, right-padded, with an attention mask."""
    g = torch.Generator().manual_seed(1)
    items = [{"input_ids": torch.randint(5, V, (n,), generator=g), "index": i} for i, n in enumerate([12, 7])]
    return CausalLMCollator(pad_id=PAD)(items)
