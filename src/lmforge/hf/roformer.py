"""RoFormer folders (RoFormerForMaskedLM, RoFormerModel): BERT with rotary positions, in ModelConfig
terms. RoFormer rotates interleaved pairs (2k, 2k+1) of each query/key head where our rotary rotates
halves (k, k + d/2), so the query and key rows are reordered into halves; its fixed sinusoidal table
(`encoder.embed_positions`) is no parameter of ours: it is checked against the sinusoid our rotary
uses and dropped (both layouts: `lmforge.hf.rotary`). Exporting does the reverse, in
`lmforge.hf.bert.bert_tensors`, which writes BERT and RoFormer alike."""

from __future__ import annotations

import re
from typing import Any

import torch

from lmforge.errors import DataError
from lmforge.hf.bert import BERT_RULES, bert_config
from lmforge.hf.common import Rules, refuse
from lmforge.hf.rotary import halves_from_pairs, roformer_table


def roformer_config(hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    if hf.get("embedding_size") not in (None, hf["hidden_size"]):
        refuse(hf, "embedding_size", f"the hidden size {hf['hidden_size']} (no embedding projection)")
    if hf.get("rotary_value", False):
        refuse(hf, "rotary_value", "false (rotary queries and keys only)")
    return {**bert_config(hf, names), "position": "rope", "rope_base": 10000.0}


def roformer_convert(state: dict[str, torch.Tensor], hf: dict[str, Any]) -> dict[str, torch.Tensor]:
    table = state.get("encoder.embed_positions.weight")
    if table is not None:
        expected = roformer_table(table.shape[0], table.shape[1])
        if (gap := (table.float() - expected).abs().max().item()) > 1e-4:
            raise DataError(
                f"encoder.embed_positions.weight differs from RoFormer's sinusoid by up to {gap:.3g}; "
                "expected the fixed table (our rotary computes it, it learns nothing)"
            )
    query_key = re.compile(r"encoder\.layer\.\d+\.attention\.self\.(query|key)\.(weight|bias)")
    heads = hf["num_attention_heads"]
    return {
        name: halves_from_pairs(tensor, heads) if query_key.fullmatch(name) else tensor
        for name, tensor in state.items()
    }


ROFORMER_RULES: Rules = [*BERT_RULES, (r"encoder\.embed_positions\.weight", None)]
