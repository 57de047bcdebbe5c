"""Write one of our models as a Hugging Face folder: `config.json`, `model.safetensors` and, given a
tokenizer, `tokenizer.json` + `tokenizer_config.json`, loadable by `transformers`' `from_pretrained`.

One `Exporter` per HF `model_type`, in `EXPORTERS`: `mismatches` says which `ModelConfig` values the
HF architecture cannot express (an empty list: it can), `config` writes the HF config, `tensors`
renames (and where HF lays weights out otherwise, reshapes) our state dict into HF names. The first
exporter that expresses a config is used; none is one `DataError` line naming, per architecture, the
first value it cannot express. The three models of the default pipeline map to RoFormer (the BERT
with rotary positions), GPT-NeoX (a rotary, LayerNorm decoder with biases) and T5; BERT, GPT-2 and
LLaMA/Mistral cover the other presets. The importer (`lmforge.hf.load`) reads BERT, GPT-2,
LLaMA/Mistral and T5 folders back, so for those `load_pretrained(export(m))` rebuilds `m`.

Where the two layouts differ, the rewrite is exact:
- RoFormer rotates interleaved pairs (0,1), (2,3), ... where we rotate halves (i, i + d/2): each
  head's query and key rows are permuted so that HF's pair k holds our rows k and k + d/2;
- GPT-2 stores Conv1D weights as (in, out) and fuses q|k|v; GPT-NeoX fuses them per head;
- T5 does not scale attention scores: a model of ours that does has the scale folded into its
  query weights.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from torch import nn

from lmforge.errors import DataError
from lmforge.hf.roformer import roformer_table
from lmforge.model.config import ModelConfig
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids

State = dict[str, torch.Tensor]

# Our activation -> HF's name for it (GPT-2's tanh approximation is `gelu_new`).
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


@dataclass(frozen=True)
class Exporter:
    model_type: str
    architecture: str  # the transformers class `from_pretrained` builds (config.json `architectures`)
    mismatches: Callable[[ModelConfig], list[str]]  # values this architecture cannot express
    config: Callable[[ModelConfig], dict[str, Any]]
    tensors: Callable[[State, ModelConfig], State]


def _value(config: ModelConfig, name: str) -> Any:
    value = getattr(config, name)
    return getattr(value, "value", value)


def _needs(config: ModelConfig, **wanted: Any) -> list[str]:
    """'model.<field>=<value> (expected ...)' for each field whose value is not among the wanted."""
    out = []
    for name, allowed in wanted.items():
        allowed = allowed if isinstance(allowed, tuple) else (allowed,)
        if _value(config, name) not in allowed:
            shown = " or ".join(map(str, allowed))
            out.append(f"model.{name}={_value(config, name)} (expected {shown})")
    return out


def _common(config: ModelConfig) -> list[str]:
    """What no exported architecture expresses: local attention, scaled embeddings, attention-only layers."""
    return _needs(config, sliding_window=None, scale_embeddings=False, mlp=True)


def _mha(config: ModelConfig) -> list[str]:
    """BERT, RoFormer, GPT-2 and GPT-NeoX: one key/value head per query head, head_dim = d/n_heads."""
    out = []
    if config.kv_heads != config.n_heads:
        out.append(f"model.n_kv_heads={config.n_kv_heads} (expected null: one key/value head per query head)")
    if config.head_size * config.n_heads != config.d_model:
        out.append(f"model.head_dim={config.head_dim} (expected null or d_model / n_heads)")
    return out


# --- BERT and RoFormer: post-LN encoders with an MLM head -------------------------------------------


def _bert_mismatches(config: ModelConfig, position: str) -> list[str]:
    return (
        _common(config)
        + _mha(config)
        + _needs(
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


def _bert_config(config: ModelConfig, model_type: str) -> dict[str, Any]:
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


def interleave_rotary(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of a query/key projection (or its bias) from rotate-half order to RoFormer's interleaved
    pairs: within each head, row 2k <- k and row 2k+1 <- k + d/2."""
    head = weight.shape[0] // n_heads
    order = torch.arange(head).view(2, head // 2).t().reshape(-1)  # 0, d/2, 1, d/2+1, ...
    per_head = weight.reshape(n_heads, head, *weight.shape[1:])
    return per_head[:, order].reshape(weight.shape)


def _bert_tensors(state: State, config: ModelConfig, prefix: str) -> State:
    rotary = config.position.value == "rope"
    out = {
        f"{prefix}.embeddings.word_embeddings.weight": state["embeddings.tok.weight"],
        f"{prefix}.embeddings.LayerNorm.weight": state["embeddings.norm.weight"],
        f"{prefix}.embeddings.LayerNorm.bias": state["embeddings.norm.bias"],
        f"{prefix}.embeddings.token_type_embeddings.weight": state.get(
            "embeddings.seg.weight", torch.zeros(1, config.d_model)
        ),  # no segments: the one type row HF adds to every token is zero
    }
    if rotary:
        out[f"{prefix}.encoder.embed_positions.weight"] = roformer_table(config.max_seq_len, config.head_size)
    else:
        out[f"{prefix}.embeddings.position_embeddings.weight"] = state["embeddings.pos.weight"]
    names = {
        "attn.q_proj": "attention.self.query",
        "attn.k_proj": "attention.self.key",
        "attn.v_proj": "attention.self.value",
        "attn.out_proj": "attention.output.dense",
        "attn_norm": "attention.output.LayerNorm",
        "mlp.fc_in": "intermediate.dense",
        "mlp.fc_out": "output.dense",
        "mlp_norm": "output.LayerNorm",
    }
    for i in range(config.n_layers):
        for ours, theirs in names.items():
            for kind in ("weight", "bias"):
                tensor = state[f"stack.layers.{i}.{ours}.{kind}"]
                if rotary and ours in ("attn.q_proj", "attn.k_proj"):
                    tensor = interleave_rotary(tensor, config.n_heads)
                out[f"{prefix}.encoder.layer.{i}.{theirs}.{kind}"] = tensor
    for kind in ("weight", "bias"):
        out[f"cls.predictions.transform.dense.{kind}"] = state[f"head.transform.0.{kind}"]
        out[f"cls.predictions.transform.LayerNorm.{kind}"] = state[f"head.transform.2.{kind}"]
    out["cls.predictions.bias"] = state.get("head.proj.bias", torch.zeros(config.vocab_size))
    if not config.tie_embeddings:
        out["cls.predictions.decoder.weight"] = state["head.proj.weight"]
    return out


# --- decoders ---------------------------------------------------------------------------------------


def _decoder_mismatches(config: ModelConfig, **wanted: Any) -> list[str]:
    return _common(config) + _needs(
        config,
        family="decoder",
        norm_placement="pre",
        final_norm=True,
        embedding_norm=False,
        attention_scale=None,
        n_segments=0,
        head_transform=False,
        head_bias=False,
        **wanted,
    )


def _head(state: State, config: ModelConfig, name: str = "lm_head.weight") -> State:
    return {} if config.tie_embeddings else {name: state["head.proj.weight"]}


def _gpt2_config(config: ModelConfig) -> dict[str, Any]:
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


def _gpt2_tensors(state: State, config: ModelConfig) -> State:
    """Conv1D keeps (in, out): every projection transposed; q|k|v fused along the output."""
    out = {
        "transformer.wte.weight": state["embeddings.tok.weight"],
        "transformer.wpe.weight": state["embeddings.pos.weight"],
    }
    for i in range(config.n_layers):
        ours, theirs = f"stack.layers.{i}.", f"transformer.h.{i}."
        for kind in ("weight", "bias"):
            out[theirs + f"ln_1.{kind}"] = state[ours + f"attn_norm.{kind}"]
            out[theirs + f"ln_2.{kind}"] = state[ours + f"mlp_norm.{kind}"]
        qkv = [state[ours + f"attn.{p}_proj.weight"] for p in "qkv"]
        out[theirs + "attn.c_attn.weight"] = torch.cat(qkv, 0).t()
        out[theirs + "attn.c_attn.bias"] = torch.cat([state[ours + f"attn.{p}_proj.bias"] for p in "qkv"])
        for ours_name, theirs_name in (("attn.out_proj", "attn.c_proj"), ("mlp.fc_in", "mlp.c_fc"),
                                       ("mlp.fc_out", "mlp.c_proj")):  # fmt: skip
            out[theirs + f"{theirs_name}.weight"] = state[ours + f"{ours_name}.weight"].t()
            out[theirs + f"{theirs_name}.bias"] = state[ours + f"{ours_name}.bias"]
    out["transformer.ln_f.weight"] = state["stack.final_norm.weight"]
    out["transformer.ln_f.bias"] = state["stack.final_norm.bias"]
    return out | _head(state, config)


def _neox_config(config: ModelConfig) -> dict[str, Any]:
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


def _neox_tensors(state: State, config: ModelConfig) -> State:
    """GPT-NeoX fuses q, k, v per head: rows [q_h; k_h; v_h] for each head h in turn."""
    out = {"gpt_neox.embed_in.weight": state["embeddings.tok.weight"]}
    heads, size = config.n_heads, config.head_size
    for i in range(config.n_layers):
        ours, theirs = f"stack.layers.{i}.", f"gpt_neox.layers.{i}."
        for kind in ("weight", "bias"):
            parts = [state[ours + f"attn.{p}_proj.{kind}"].reshape(heads, size, -1) for p in "qkv"]
            fused = torch.cat(parts, dim=1).reshape(3 * heads * size, -1)
            out[theirs + f"attention.query_key_value.{kind}"] = fused.squeeze(-1) if kind == "bias" else fused
            for ours_name, theirs_name in (("attn_norm", "input_layernorm"), ("mlp_norm", "post_attention_layernorm"),
                                           ("attn.out_proj", "attention.dense"), ("mlp.fc_in", "mlp.dense_h_to_4h"),
                                           ("mlp.fc_out", "mlp.dense_4h_to_h")):  # fmt: skip
                out[theirs + f"{theirs_name}.{kind}"] = state[ours + f"{ours_name}.{kind}"]
    out["gpt_neox.final_layer_norm.weight"] = state["stack.final_norm.weight"]
    out["gpt_neox.final_layer_norm.bias"] = state["stack.final_norm.bias"]
    return out | _head(state, config)


def _llama_mismatches(config: ModelConfig, sliding: bool) -> list[str]:
    out = _decoder_mismatches(config, position="rope", norm="rms", activation="swiglu", bias=False)
    out = [line for line in out if not line.startswith("model.sliding_window")]
    if sliding and config.sliding_window is None:
        out.append("model.sliding_window=None (expected a window: Mistral)")
    if not sliding and config.sliding_window is not None:
        out.append(f"model.sliding_window={config.sliding_window} (expected null: LLaMA)")
    if config.global_every is not None:
        out.append(f"model.global_every={config.global_every} (expected null: every layer local)")
    return out


def _llama_config(config: ModelConfig, sliding: bool) -> dict[str, Any]:
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


def _llama_tensors(state: State, config: ModelConfig) -> State:
    out = {"model.embed_tokens.weight": state["embeddings.tok.weight"]}
    names = {
        "attn.q_proj": "self_attn.q_proj", "attn.k_proj": "self_attn.k_proj", "attn.v_proj": "self_attn.v_proj",
        "attn.out_proj": "self_attn.o_proj", "mlp.fc_gate": "mlp.gate_proj", "mlp.fc_in": "mlp.up_proj",
        "mlp.fc_out": "mlp.down_proj", "attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm",
    }  # fmt: skip
    for i in range(config.n_layers):
        for ours, theirs in names.items():
            out[f"model.layers.{i}.{theirs}.weight"] = state[f"stack.layers.{i}.{ours}.weight"]
    out["model.norm.weight"] = state["stack.final_norm.weight"]
    return out | _head(state, config)


# --- T5 ---------------------------------------------------------------------------------------------

T5_MLPS = {"relu": "relu", "geglu": "gated-gelu"}


def _t5_mismatches(config: ModelConfig) -> list[str]:
    out = _common(config) + _needs(
        config,
        family="encoder_decoder",
        position="relative",
        norm="rms",
        norm_placement="pre",
        final_norm=True,
        embedding_norm=False,
        activation=tuple(T5_MLPS),
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


def _t5_config(config: ModelConfig) -> dict[str, Any]:
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
        feed_forward_proj=T5_MLPS[config.activation.value],
        is_encoder_decoder=True,
        tie_word_embeddings=config.tie_embeddings,
        scale_decoder_outputs=config.scale_output,
        pad_token_id=config.pad_token_id,
        decoder_start_token_id=config.pad_token_id,
    )


def _t5_tensors(state: State, config: ModelConfig) -> State:
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
    return out | _head(state, config)


EXPORTERS: tuple[Exporter, ...] = (
    Exporter("bert", "BertForMaskedLM", lambda c: _bert_mismatches(c, "learned"),
             lambda c: _bert_config(c, "bert"), lambda s, c: _bert_tensors(s, c, "bert")),
    Exporter("roformer", "RoFormerForMaskedLM", lambda c: _bert_mismatches(c, "rope"),
             lambda c: _bert_config(c, "roformer"), lambda s, c: _bert_tensors(s, c, "roformer")),
    Exporter("gpt2", "GPT2LMHeadModel",
             lambda c: _decoder_mismatches(c, position="learned", norm="layer", activation=tuple(HF_ACTIVATIONS),
                                           bias=True) + _mha(c),
             _gpt2_config, _gpt2_tensors),
    Exporter("gpt_neox", "GPTNeoXForCausalLM",
             lambda c: _decoder_mismatches(c, position="rope", norm="layer", activation=tuple(HF_ACTIVATIONS),
                                           bias=True) + _mha(c),
             _neox_config, _neox_tensors),
    Exporter("llama", "LlamaForCausalLM", lambda c: _llama_mismatches(c, sliding=False),
             lambda c: _llama_config(c, sliding=False), _llama_tensors),
    Exporter("mistral", "MistralForCausalLM", lambda c: _llama_mismatches(c, sliding=True),
             lambda c: _llama_config(c, sliding=True), _llama_tensors),
    Exporter("t5", "T5ForConditionalGeneration", _t5_mismatches, _t5_config, _t5_tensors),
)  # fmt: skip


def exporter_for(config: ModelConfig) -> Exporter:
    """The first architecture that expresses `config`; else one line with each one's first refusal."""
    refusals = []
    for exporter in EXPORTERS:
        missing = exporter.mismatches(config)
        if not missing:
            return exporter
        refusals.append(f"{exporter.model_type}: {missing[0]}")
    raise DataError(f"hf export: no Hugging Face architecture expresses this model ({'; '.join(refusals)})")


def hf_state(model: nn.Module, config: ModelConfig) -> tuple[Exporter, State]:
    exporter = exporter_for(config)
    state = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    if config.family.value == "encoder_decoder" and not torch.equal(
        state["encoder_embeddings.tok.weight"], state["decoder_embeddings.tok.weight"]
    ):
        raise DataError(
            "hf export: the encoder and decoder embeddings differ; expected T5's one shared matrix"
        )
    tensors = exporter.tensors(state, config)
    return exporter, {name: tensor.contiguous().clone() for name, tensor in tensors.items()}


def tokenizer_config(tokenizer: Tokenizer) -> dict[str, Any]:
    """What `AutoTokenizer` needs beside tokenizer.json: its class and the special tokens' roles."""
    roles = {
        "pad_token": ("[PAD]", "<pad>"), "unk_token": ("[UNK]",), "cls_token": ("[CLS]",),
        "sep_token": ("[SEP]",), "mask_token": ("[MASK]",), "bos_token": ("[CLS]", "<|endoftext|>"),
        "eos_token": ("[SEP]", "<|endoftext|>"),
    }  # fmt: skip
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    out: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    for role, candidates in roles.items():
        found = next((token for token in candidates if token in vocab), None)
        if found is not None:
            out[role] = found
    sentinels = sorted((t for t in vocab if t.startswith("<extra_id_")), key=vocab.get)
    if sentinels:
        out["additional_special_tokens"] = sentinels
    return out


def export_pretrained(
    model: nn.Module, folder: str | Path, tokenizer_file: str | Path | None = None
) -> Exporter:
    """Write `model` (with `model.config`) as a Hugging Face folder. Every file is written into a
    temporary folder beside `folder`, which replaces it by renames only once complete: an error leaves
    the previous export as it was."""
    config: ModelConfig = model.config
    exporter, tensors = hf_state(model, config)
    hf = {
        "model_type": exporter.model_type,
        "architectures": [exporter.architecture],
        **exporter.config(config),
    }
    hf.update(
        bos_token_id=None, eos_token_id=None
    )  # HF's class defaults (GPT-2's 50256) name no token of ours
    tokenizer = None
    if tokenizer_file is not None:
        tokenizer = load_tokenizer(tokenizer_file)
        specials = special_token_ids(tokenizer)
        hf.update(bos_token_id=specials.bos, eos_token_id=specials.eos)
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        (staging / "config.json").write_text(json.dumps(hf, indent=2, sort_keys=True) + "\n")
        save_file(tensors, str(staging / "model.safetensors"), metadata={"format": "pt"})
        if tokenizer is not None:
            shutil.copyfile(tokenizer_file, staging / "tokenizer.json")
            (staging / "tokenizer_config.json").write_text(
                json.dumps(tokenizer_config(tokenizer), indent=2, sort_keys=True) + "\n"
            )
        previous = folder.with_name(f".{folder.name}.previous")
        if folder.exists():
            shutil.rmtree(previous, ignore_errors=True)
            folder.rename(previous)
        staging.rename(folder)
        shutil.rmtree(previous, ignore_errors=True)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return exporter
