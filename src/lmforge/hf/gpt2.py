"""GPT-2 folders in ModelConfig terms: Conv1D weights transposed, the fused q|k|v split."""

from __future__ import annotations

import re
from typing import Any

import torch

from lmforge.hf.common import Rules, activation, refuse


def gpt2_config(hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    if hf.get("scale_attn_by_inverse_layer_idx", False):
        refuse(hf, "scale_attn_by_inverse_layer_idx", "false")
    return dict(
        family="decoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["n_embd"],
        n_layers=hf["n_layer"],
        n_heads=hf["n_head"],
        d_ff=hf.get("n_inner") or 4 * hf["n_embd"],
        max_seq_len=hf["n_positions"],
        position="learned",
        norm="layer",
        norm_placement="pre",
        norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        activation=activation(hf, "activation_function"),
        attention_scale=None if hf.get("scale_attn_weights", True) else 1.0,
        tie_embeddings=hf.get("tie_word_embeddings", True),
        dropout=hf.get("resid_pdrop", 0.1),
        embedding_dropout=hf.get("embd_pdrop", 0.1),
        attention_dropout=hf.get("attn_pdrop", 0.1),
    )


def gpt2_convert(state: dict[str, torch.Tensor], hf: dict[str, Any]) -> dict[str, torch.Tensor]:
    """GPT-2's Conv1D stores (in, out): transpose to Linear's (out, in); split the fused q|k|v."""
    out = {}
    for name, tensor in state.items():
        if re.fullmatch(r"h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight", name):
            tensor = tensor.t().contiguous()
        if ".attn.c_attn." in name:
            for part, chunk in zip("qkv", tensor.chunk(3, dim=0)):
                out[name.replace("c_attn", f"{part}_fused")] = chunk.contiguous()
        else:
            out[name] = tensor
    return out


_H = r"h\.(\d+)\."
GPT2_RULES: Rules = [
    (r"wte\.weight", "embeddings.tok.weight"),
    (r"wpe\.weight", "embeddings.pos.weight"),
    (_H + r"ln_1\.(weight|bias)", r"stack.layers.\1.attn_norm.\2"),
    (_H + r"ln_2\.(weight|bias)", r"stack.layers.\1.mlp_norm.\2"),
    (_H + r"attn\.([qkv])_fused\.(weight|bias)", r"stack.layers.\1.attn.\2_proj.\3"),
    (_H + r"attn\.c_proj\.(weight|bias)", r"stack.layers.\1.attn.out_proj.\2"),
    (_H + r"mlp\.c_fc\.(weight|bias)", r"stack.layers.\1.mlp.fc_in.\2"),
    (_H + r"mlp\.c_proj\.(weight|bias)", r"stack.layers.\1.mlp.fc_out.\2"),
    (r"ln_f\.(weight|bias)", r"stack.final_norm.\1"),
    (r"lm_head\.weight", "head.proj.weight"),
    (_H + r"attn\.(masked_)?bias", None),  # causal-mask buffers of old checkpoints
]
