"""BERT-style folders (BertModel, BertForMaskedLM, BertForPreTraining; MiniLM) in ModelConfig terms,
both ways: `bert_config` and `BERT_RULES` read a folder; `bert_mismatches`, `bert_hf_config` and
`bert_tensors` write one, for BERT and for RoFormer (BERT with rotary positions, whose pair order and
fixed table `lmforge.hf.rotary` holds)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import torch

from lmforge.hf.common import (
    HF_ACTIVATIONS,
    Rules,
    State,
    activation,
    inexpressible,
    needs,
    one_kv_head_per_query,
    refuse,
)
from lmforge.hf.rename import backwards, prefixed
from lmforge.hf.rotary import interleave_rotary, roformer_table

if TYPE_CHECKING:
    from lmforge.model.config import ModelConfig


def bert_config(hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    if hf.get("position_embedding_type", "absolute") != "absolute":
        refuse(hf, "position_embedding_type", "'absolute'")
    has_head = "cls.predictions.transform.dense.weight" in names
    return dict(
        family="encoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["intermediate_size"],
        max_seq_len=hf["max_position_embeddings"],
        position="learned",
        norm="layer",
        norm_placement="post",
        norm_eps=hf.get("layer_norm_eps", 1e-12),
        final_norm=False,
        embedding_norm=True,
        activation=activation(hf, "hidden_act"),
        n_segments=hf.get("type_vocab_size", 2),
        head_transform=has_head,  # a bare BertModel has no MLM head: the tied projection alone
        head_bias=has_head,
        tie_embeddings=hf.get("tie_word_embeddings", True),
        dropout=hf.get("hidden_dropout_prob", 0.1),
        embedding_dropout=hf.get("hidden_dropout_prob", 0.1),
        attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
        pad_token_id=hf.get("pad_token_id") or 0,
    )


_LAYER = r"encoder\.layer\.(\d+)\."
BERT_RULES: Rules = [
    (r"embeddings\.word_embeddings\.weight", "embeddings.tok.weight"),
    (r"embeddings\.position_embeddings\.weight", "embeddings.pos.weight"),
    (r"embeddings\.token_type_embeddings\.weight", "embeddings.seg.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"embeddings.norm.\1"),
    (_LAYER + r"attention\.self\.query\.(weight|bias)", r"stack.layers.\1.attn.q_proj.\2"),
    (_LAYER + r"attention\.self\.key\.(weight|bias)", r"stack.layers.\1.attn.k_proj.\2"),
    (_LAYER + r"attention\.self\.value\.(weight|bias)", r"stack.layers.\1.attn.v_proj.\2"),
    (_LAYER + r"attention\.output\.dense\.(weight|bias)", r"stack.layers.\1.attn.out_proj.\2"),
    (_LAYER + r"attention\.output\.LayerNorm\.(weight|bias)", r"stack.layers.\1.attn_norm.\2"),
    (_LAYER + r"intermediate\.dense\.(weight|bias)", r"stack.layers.\1.mlp.fc_in.\2"),
    (_LAYER + r"output\.dense\.(weight|bias)", r"stack.layers.\1.mlp.fc_out.\2"),
    (_LAYER + r"output\.LayerNorm\.(weight|bias)", r"stack.layers.\1.mlp_norm.\2"),
    (r"cls\.predictions\.transform\.dense\.(weight|bias)", r"head.transform.0.\1"),
    (r"cls\.predictions\.transform\.LayerNorm\.(weight|bias)", r"head.transform.2.\1"),
    (r"cls\.predictions\.(?:decoder\.)?bias", "head.proj.bias"),
    (r"cls\.predictions\.decoder\.weight", "head.proj.weight"),
    (r"pooler\..*|cls\.seq_relationship\..*|embeddings\.position_ids", None),
]


# --- export: ModelConfig -> BertForMaskedLM and RoFormerForMaskedLM -------------------------------


def bert_mismatches(config: ModelConfig, position: str) -> list[str]:
    return (
        inexpressible(config)
        + one_kv_head_per_query(config)
        + needs(
            config,
            family="encoder",
            position=position,
            norm="layer",
            norm_placement="post",
            final_norm=False,
            embedding_norm=True,
            activation=tuple(HF_ACTIVATIONS),
            bias=True,
            attention_scale=None,
            head_transform=True,
        )
        + (
            []
            if position != "rope" or config.rope_base == 10000.0
            else [f"model.rope_base={config.rope_base} (expected 10000.0, RoFormer's fixed base)"]
        )  # fmt: skip
    )


def bert_hf_config(config: ModelConfig, model_type: str) -> dict[str, Any]:
    out = dict(
        vocab_size=config.vocab_size,
        hidden_size=config.d_model,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        intermediate_size=config.d_ff,
        hidden_act=HF_ACTIVATIONS[config.activation.value],
        hidden_dropout_prob=config.dropout,
        attention_probs_dropout_prob=config.attention_dropout,
        max_position_embeddings=config.max_seq_len,
        type_vocab_size=max(config.n_segments, 1),
        layer_norm_eps=config.norm_eps,
        pad_token_id=config.pad_token_id,
        tie_word_embeddings=config.tie_embeddings,
    )
    if model_type == "roformer":
        out.update(embedding_size=config.d_model, rotary_value=False)
    else:
        out.update(position_embedding_type="absolute")
    return out


_QUERY_KEY = r"stack\.layers\.\d+\.attn\.[qk]_proj\.(weight|bias)"  # our rotary rows, in halves


def bert_tensors(state: State, config: ModelConfig, prefix: str) -> State:
    """`BERT_RULES` read backwards; RoFormer's query/key rows interleaved and its fixed table added."""
    ours = {  # no segments: the one type row HF adds to every token is zero; no head bias: a zero one
        "embeddings.seg.weight": torch.zeros(1, config.d_model),
        "head.proj.bias": torch.zeros(config.vocab_size),
        **state,
    }
    if config.tie_embeddings:
        del ours["head.proj.weight"]  # HF ties cls.predictions.decoder to the word embeddings itself
    rotary = config.position.value == "rope"
    if rotary:
        ours = {
            name: interleave_rotary(tensor, config.n_heads) if re.fullmatch(_QUERY_KEY, name) else tensor
            for name, tensor in ours.items()
        }
    out = prefixed(backwards(ours, BERT_RULES), f"{prefix}.", outside=("cls.",))
    if rotary:
        out[f"{prefix}.encoder.embed_positions.weight"] = roformer_table(config.max_seq_len, config.head_size)
    return out
