"""GPT-NeoX folders (GPTNeoXForCausalLM, Pythia) in ModelConfig terms: rotary positions, LayerNorm
before each sublayer, q, k and v fused per head. Our block adds attention and MLP in turn, so a folder
with `use_parallel_residual` (GPT-NeoX's default, x + attn(ln1(x)) + mlp(ln2(x))) is refused, and so
is a partial rotary factor below 1. Exporting (`gpt_neox_hf_config`, `gpt_neox_tensors`) fuses q, k
and v per head again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from lmforge.hf.common import HF_ACTIVATIONS, Rules, State, activation, refuse, untied_head
from lmforge.hf.rename import backwards, prefixed

if TYPE_CHECKING:
    from lmforge.model.config import ModelConfig


def _rope(hf: dict[str, Any]) -> dict[str, Any]:
    return hf.get("rope_parameters") or hf.get("rope_scaling") or {}


def gpt_neox_config(hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    rope = _rope(hf)
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        refuse(hf, "rope_parameters" if "rope_parameters" in hf else "rope_scaling", "default RoPE")
    if hf.get("use_parallel_residual", True):
        refuse(hf, "use_parallel_residual", "false (attention, then the MLP, in turn)")
    for key in ("rope_parameters", "partial_rotary_factor", "rotary_pct"):  # newest spelling first
        found = hf.get(key)
        partial = found.get("partial_rotary_factor", 1.0) if isinstance(found, dict) else found
        if partial not in (None, 1.0):
            refuse(hf, key, "a partial rotary factor of 1.0 (every dimension of a head rotated)")
        if partial is not None:
            break
    if not hf.get("attention_bias", True):
        refuse(hf, "attention_bias", "true (the MLP has biases too)")
    theta = rope.get("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    return dict(
        family="decoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["intermediate_size"],
        max_seq_len=hf.get("max_position_embeddings", 2048),
        position="rope",
        rope_base=float(theta),
        norm="layer",
        norm_placement="pre",
        norm_eps=hf.get("layer_norm_eps", 1e-5),
        activation=activation(hf, "hidden_act"),
        tie_embeddings=hf.get("tie_word_embeddings", False),
        dropout=hf.get("hidden_dropout", 0.0),
        embedding_dropout=hf.get("hidden_dropout", 0.0),
        attention_dropout=hf.get("attention_dropout", 0.0),
        pad_token_id=hf.get("pad_token_id") or 0,
    )


def gpt_neox_convert(state: dict[str, torch.Tensor], hf: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Split each layer's fused projection: rows [q_h; k_h; v_h] for head h in turn."""
    heads = hf["num_attention_heads"]
    out = {}
    for name, tensor in state.items():
        if ".attention.query_key_value." not in name:
            out[name] = tensor
            continue
        per_head = tensor.reshape(heads, 3, -1, *tensor.shape[1:])  # (heads, q|k|v, head size, ...)
        for i, part in enumerate("qkv"):
            fused = per_head[:, i].reshape(-1, *tensor.shape[1:]).contiguous()
            out[name.replace("query_key_value", f"{part}_fused")] = fused
    return out


_L = r"layers\.(\d+)\."
GPT_NEOX_RULES: Rules = [
    (r"embed_in\.weight", "embeddings.tok.weight"),
    (_L + r"input_layernorm\.(weight|bias)", r"stack.layers.\1.attn_norm.\2"),
    (_L + r"post_attention_layernorm\.(weight|bias)", r"stack.layers.\1.mlp_norm.\2"),
    (_L + r"attention\.([qkv])_fused\.(weight|bias)", r"stack.layers.\1.attn.\2_proj.\3"),
    (_L + r"attention\.dense\.(weight|bias)", r"stack.layers.\1.attn.out_proj.\2"),
    (_L + r"mlp\.dense_h_to_4h\.(weight|bias)", r"stack.layers.\1.mlp.fc_in.\2"),
    (_L + r"mlp\.dense_4h_to_h\.(weight|bias)", r"stack.layers.\1.mlp.fc_out.\2"),
    (r"final_layer_norm\.(weight|bias)", r"stack.final_norm.\1"),
    (r"(?:embed_out|lm_head)\.weight", "head.proj.weight"),
    (r"(?:" + _L + r"attention\.)?(?:rotary_emb\.inv_freq|bias|masked_bias)", None),  # buffers of old files
]


# --- export: ModelConfig -> GPTNeoXForCausalLM ----------------------------------------------------


def gpt_neox_hf_config(config: ModelConfig) -> dict[str, Any]:
    return dict(
        vocab_size=config.vocab_size,
        hidden_size=config.d_model,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        intermediate_size=config.d_ff,
        hidden_act=HF_ACTIVATIONS[config.activation.value],
        max_position_embeddings=config.max_seq_len,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": config.rope_base,
            "partial_rotary_factor": 1.0,
        },
        layer_norm_eps=config.norm_eps,
        use_parallel_residual=False,  # x + attn(ln1(x)), then + mlp(ln2(.)): our sequential block
        attention_bias=True,
        hidden_dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        tie_word_embeddings=config.tie_embeddings,
        pad_token_id=config.pad_token_id,
    )


def gpt_neox_tensors(state: State, config: ModelConfig) -> State:
    """`GPT_NEOX_RULES` read backwards, then q, k and v fused per head again: rows [q_h; k_h; v_h] for
    each head h in turn (`gpt_neox_convert` splits them)."""
    heads, size = config.n_heads, config.head_size
    body = {name: tensor for name, tensor in state.items() if name != "head.proj.weight"}
    renamed = backwards(body, GPT_NEOX_RULES)
    out = {}
    for name, tensor in renamed.items():
        if ".attention.q_fused." in name:
            parts = [renamed[name.replace("q_fused", f"{p}_fused")].reshape(heads, size, -1) for p in "qkv"]
            fused = torch.cat(parts, dim=1).reshape(3 * heads * size, -1)
            out[name.replace("q_fused", "query_key_value")] = (
                fused.squeeze(-1) if name.endswith("bias") else fused
            )
        elif "_fused." not in name:
            out[name] = tensor
    return prefixed(out, "gpt_neox.") | untied_head(state, config)
