"""T5 folders in ModelConfig terms, both ways: v1.0 (ReLU, tied, output rescaled) and v1.1 (gated
GELU); `t5_config` and `T5_RULES` read a folder, `t5_mismatches`, `t5_hf_config` and `t5_tensors`
write one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lmforge.hf.common import Rules, State, inexpressible, needs, refuse, untied_head

if TYPE_CHECKING:
    from lmforge.model.config import ModelConfig

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


# --- export: ModelConfig -> T5ForConditionalGeneration --------------------------------------------


T5_EXPORT_MLPS = {"relu": "relu", "geglu": "gated-gelu"}


def t5_mismatches(config: ModelConfig) -> list[str]:
    out = inexpressible(config) + needs(
        config,
        family="encoder_decoder",
        position="relative",
        norm="rms",
        norm_placement="pre",
        final_norm=True,
        embedding_norm=False,
        activation=tuple(T5_EXPORT_MLPS),
        bias=False,
        n_segments=0,
        head_transform=False,
        head_bias=False,
    )
    if config.kv_heads != config.n_heads:
        out.append(
            f"model.n_kv_heads={config.n_kv_heads} (expected null: T5 has one key/value head per query head)"
        )
    return out


def t5_hf_config(config: ModelConfig) -> dict[str, Any]:
    return dict(
        vocab_size=config.vocab_size,
        d_model=config.d_model,
        d_kv=config.head_size,
        d_ff=config.d_ff,
        num_layers=config.encoder_layers,
        num_decoder_layers=config.n_layers,
        num_heads=config.n_heads,
        relative_attention_num_buckets=config.relative_buckets,
        relative_attention_max_distance=config.relative_max_distance,
        dropout_rate=config.dropout,
        layer_norm_epsilon=config.norm_eps,
        feed_forward_proj=T5_EXPORT_MLPS[config.activation.value],
        is_encoder_decoder=True,
        tie_word_embeddings=config.tie_embeddings,
        scale_decoder_outputs=config.scale_output,
        pad_token_id=config.pad_token_id,
        decoder_start_token_id=config.pad_token_id,
    )


def t5_tensors(state: State, config: ModelConfig) -> State:
    """T5 scores are q.k + bias: a score scale of ours is folded into the query weights."""
    scale = config.attention_scale if config.attention_scale is not None else config.head_size**-0.5
    gated = config.activation.value == "geglu"
    mlp = {"fc_gate": "wi_0", "fc_in": "wi_1", "fc_out": "wo"} if gated else {"fc_in": "wi", "fc_out": "wo"}
    attn = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "out_proj": "o"}
    out = {"shared.weight": state["encoder_embeddings.tok.weight"]}
    for stack, layers in (("encoder", config.encoder_layers), ("decoder", config.n_layers)):
        sublayers = [("attn", "attn_norm", "SelfAttention")]
        if stack == "decoder":
            sublayers.append(("cross_attn", "cross_norm", "EncDecAttention"))
        out[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = state[
            f"{stack}.relative.bias.weight"
        ]
        for i in range(layers):
            ours, theirs = f"{stack}.layers.{i}.", f"{stack}.block.{i}.layer."
            for j, (sub, norm, name) in enumerate(sublayers):
                for ours_proj, theirs_proj in attn.items():
                    weight = state[ours + f"{sub}.{ours_proj}.weight"]
                    out[theirs + f"{j}.{name}.{theirs_proj}.weight"] = (
                        weight * scale if ours_proj == "q_proj" else weight
                    )
                out[theirs + f"{j}.layer_norm.weight"] = state[ours + f"{norm}.weight"]
            j = len(sublayers)
            for ours_fc, theirs_fc in mlp.items():
                out[theirs + f"{j}.DenseReluDense.{theirs_fc}.weight"] = state[ours + f"mlp.{ours_fc}.weight"]
            out[theirs + f"{j}.layer_norm.weight"] = state[ours + "mlp_norm.weight"]
        out[f"{stack}.final_layer_norm.weight"] = state[f"{stack}.final_norm.weight"]
    return out | untied_head(state, config)
