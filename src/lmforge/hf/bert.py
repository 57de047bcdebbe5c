"""BERT-style folders (BertModel, BertForMaskedLM, BertForPreTraining; MiniLM) in ModelConfig terms."""

from __future__ import annotations

from typing import Any

from lmforge.hf.common import Rules, activation, refuse


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
