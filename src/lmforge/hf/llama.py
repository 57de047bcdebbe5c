"""LLaMA and Mistral folders in ModelConfig terms (RoPE, RMSNorm, GQA, SwiGLU, sliding window), both
ways: `llama_config` and `LLAMA_RULES` read a folder, `llama_mismatches`, `llama_hf_config` and
`llama_tensors` write one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lmforge.hf.common import Rules, State, decoder_needs, refuse, untied_head
from lmforge.hf.rename import backwards, prefixed

if TYPE_CHECKING:
    from lmforge.model.config import ModelConfig


def llama_config(hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        refuse(hf, "rope_parameters" if "rope_parameters" in hf else "rope_scaling", "default RoPE")
    if hf.get("hidden_act", "silu") != "silu":
        refuse(hf, "hidden_act", "'silu' (SwiGLU)")
    if hf.get("mlp_bias", False) != hf.get("attention_bias", False):
        refuse(hf, "mlp_bias", f"the same as attention_bias={hf.get('attention_bias', False)}")
    heads = hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or hf["hidden_size"] // heads
    return dict(
        family="decoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=heads,
        n_kv_heads=hf.get("num_key_value_heads") or heads,
        head_dim=None if head_dim * heads == hf["hidden_size"] else head_dim,
        d_ff=hf["intermediate_size"],
        max_seq_len=hf.get("max_position_embeddings", 2048),
        position="rope",
        rope_base=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
        norm="rms",
        norm_placement="pre",
        norm_eps=hf.get("rms_norm_eps", 1e-6),
        activation="swiglu",
        bias=hf.get("attention_bias", False),
        sliding_window=hf.get("sliding_window"),
        tie_embeddings=hf.get("tie_word_embeddings", False),
        attention_dropout=hf.get("attention_dropout", 0.0),
        pad_token_id=hf.get("pad_token_id") or 0,
    )


_L = r"layers\.(\d+)\."
LLAMA_RULES: Rules = [
    (r"embed_tokens\.weight", "embeddings.tok.weight"),
    (_L + r"self_attn\.([qkv])_proj\.(weight|bias)", r"stack.layers.\1.attn.\2_proj.\3"),
    (_L + r"self_attn\.o_proj\.(weight|bias)", r"stack.layers.\1.attn.out_proj.\2"),
    (_L + r"mlp\.gate_proj\.(weight|bias)", r"stack.layers.\1.mlp.fc_gate.\2"),
    (_L + r"mlp\.up_proj\.(weight|bias)", r"stack.layers.\1.mlp.fc_in.\2"),
    (_L + r"mlp\.down_proj\.(weight|bias)", r"stack.layers.\1.mlp.fc_out.\2"),
    (_L + r"input_layernorm\.weight", r"stack.layers.\1.attn_norm.weight"),
    (_L + r"post_attention_layernorm\.weight", r"stack.layers.\1.mlp_norm.weight"),
    (r"norm\.weight", "stack.final_norm.weight"),
    (r"lm_head\.weight", "head.proj.weight"),
    (_L + r"self_attn\.rotary_emb\.inv_freq", None),
]


# --- export: ModelConfig -> LlamaForCausalLM (no window), MistralForCausalLM (a window) -----------


def llama_mismatches(config: ModelConfig, sliding: bool) -> list[str]:
    out = decoder_needs(config, position="rope", norm="rms", activation="swiglu", bias=False)
    out = [line for line in out if not line.startswith("model.sliding_window")]
    if sliding and config.sliding_window is None:
        out.append("model.sliding_window=None (expected a window: Mistral)")
    if not sliding and config.sliding_window is not None:
        out.append(f"model.sliding_window={config.sliding_window} (expected null: LLaMA)")
    if config.global_every is not None:
        out.append(f"model.global_every={config.global_every} (expected null: every layer local)")
    return out


def llama_hf_config(config: ModelConfig, sliding: bool) -> dict[str, Any]:
    out = dict(
        vocab_size=config.vocab_size,
        hidden_size=config.d_model,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        num_key_value_heads=config.kv_heads,
        head_dim=config.head_size,
        intermediate_size=config.d_ff,
        hidden_act="silu",
        max_position_embeddings=config.max_seq_len,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_base},
        rms_norm_eps=config.norm_eps,
        attention_bias=False,
        attention_dropout=config.attention_dropout,
        tie_word_embeddings=config.tie_embeddings,
        pad_token_id=config.pad_token_id,
    )
    if sliding:
        out["sliding_window"] = config.sliding_window
    else:
        out["mlp_bias"] = False
    return out


def llama_tensors(state: State, config: ModelConfig) -> State:
    """`LLAMA_RULES` read backwards, under `model.`; an untied head beside it."""
    body = {name: tensor for name, tensor in state.items() if name != "head.proj.weight"}
    return prefixed(backwards(body, LLAMA_RULES), "model.") | untied_head(state, config)
