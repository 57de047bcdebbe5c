"""GPT-2 folders in ModelConfig terms, both ways: Conv1D weights transposed, the fused q|k|v split on
import (`gpt2_convert`) and joined on export (`gpt2_tensors`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import torch

from lmforge.hf.common import HF_ACTIVATIONS, Rules, State, activation, refuse, untied_head
from lmforge.hf.rename import backwards, prefixed

if TYPE_CHECKING:
    from lmforge.model.config import ModelConfig


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


# --- export: ModelConfig -> GPT2LMHeadModel -------------------------------------------------------


def gpt2_hf_config(config: ModelConfig) -> dict[str, Any]:
    return dict(
        vocab_size=config.vocab_size,
        n_embd=config.d_model,
        n_layer=config.n_layers,
        n_head=config.n_heads,
        n_inner=config.d_ff,
        n_positions=config.max_seq_len,
        activation_function=HF_ACTIVATIONS[config.activation.value],
        layer_norm_epsilon=config.norm_eps,
        resid_pdrop=config.dropout,
        embd_pdrop=config.embedding_dropout,
        attn_pdrop=config.attention_dropout,
        tie_word_embeddings=config.tie_embeddings,
        pad_token_id=config.pad_token_id,
    )


def gpt2_tensors(state: State, config: ModelConfig) -> State:
    """`GPT2_RULES` read backwards, then what `gpt2_convert` undoes: q|k|v fused along the output, and
    every Conv1D weight stored (in, out)."""
    body = {name: tensor for name, tensor in state.items() if name != "head.proj.weight"}
    renamed = backwards(body, GPT2_RULES)
    out = {}
    for name, tensor in renamed.items():
        if ".attn.q_fused." in name:
            out[name.replace("q_fused", "c_attn")] = torch.cat(
                [renamed[name.replace("q_fused", f"{p}_fused")] for p in "qkv"]
            )
        elif "_fused." not in name:
            out[name] = tensor
    conv1d = re.compile(r"h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight")
    out = {name: tensor.t() if conv1d.fullmatch(name) else tensor for name, tensor in out.items()}
    return prefixed(out, "transformer.") | untied_head(state, config)
