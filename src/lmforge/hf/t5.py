"""T5 folders in ModelConfig terms: v1.0 (ReLU, tied, output rescaled) and v1.1 (gated GELU)."""

from __future__ import annotations

from typing import Any

from lmforge.hf.common import Rules, refuse

T5_MLPS = {"relu": "relu", "gated-gelu": "geglu"}


def t5_config(hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    mlp = hf.get("feed_forward_proj", "relu")
    if mlp not in T5_MLPS:
        refuse(hf, "feed_forward_proj", f"one of {', '.join(T5_MLPS)}")
    tied = hf.get("tie_word_embeddings", True)
    # T5 v1.0 rescales the decoder output before the tied projection, v1.1 (untied) does not; configs
    # saved by transformers >= 5 say so in `scale_decoder_outputs`, older ones through the tie.
    scale = hf.get("scale_decoder_outputs", tied)
    return dict(
        family="encoder_decoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["d_model"],
        n_layers=hf.get("num_decoder_layers") or hf["num_layers"],
        n_encoder_layers=hf["num_layers"],
        n_heads=hf["num_heads"],
        head_dim=hf["d_kv"],
        d_ff=hf["d_ff"],
        max_seq_len=512,  # relative positions have no table; this bounds the KV cache only
        position="relative",
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128),
        norm="rms",
        norm_placement="pre",
        norm_eps=hf.get("layer_norm_epsilon", 1e-6),
        activation=T5_MLPS[mlp],
        attention_scale=1.0,  # T5 folds 1/sqrt(d) into its initialisation
        bias=False,
        tie_embeddings=tied,
        scale_output=scale,
        dropout=hf.get("dropout_rate", 0.1),
        pad_token_id=hf.get("pad_token_id") or 0,
    )


_ATTN = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "out_proj"}
_FC = {"wi": "fc_in", "wi_0": "fc_gate", "wi_1": "fc_in", "wo": "fc_out"}  # wi_0 is v1.1's gated branch
_T5_ATTN = r"\.(SelfAttention|EncDecAttention)\.([qkvo])\.weight"
_T5_SUBLAYER = {"SelfAttention": "attn", "EncDecAttention": "cross_attn"}
T5_RULES: Rules = [
    (r"shared\.weight", "encoder_embeddings.tok.weight"),
    (r"(encoder|decoder)\.embed_tokens\.weight", None),  # the same matrix as `shared`
    (
        r"(encoder|decoder)\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.weight",
        r"\1.relative.bias.weight",
    ),
    (
        r"(encoder|decoder)\.block\.(\d+)\.layer\.\d" + _T5_ATTN,
        lambda m: f"{m[1]}.layers.{m[2]}.{_T5_SUBLAYER[m[3]]}.{_ATTN[m[4]]}.weight",
    ),
    (r"(encoder|decoder)\.block\.(\d+)\.layer\.0\.layer_norm\.weight", r"\1.layers.\2.attn_norm.weight"),
    (r"decoder\.block\.(\d+)\.layer\.1\.layer_norm\.weight", r"decoder.layers.\1.cross_norm.weight"),
    (
        r"(encoder|decoder)\.block\.(\d+)\.layer\.[12]\.DenseReluDense\.(wi|wi_0|wi_1|wo)\.weight",
        lambda m: f"{m[1]}.layers.{m[2]}.mlp.{_FC[m[3]]}.weight",
    ),
    (r"encoder\.block\.(\d+)\.layer\.1\.layer_norm\.weight", r"encoder.layers.\1.mlp_norm.weight"),
    (r"decoder\.block\.(\d+)\.layer\.2\.layer_norm\.weight", r"decoder.layers.\1.mlp_norm.weight"),
    (r"(encoder|decoder)\.final_layer_norm\.weight", r"\1.final_norm.weight"),
    (r"lm_head\.weight", "head.proj.weight"),
]
