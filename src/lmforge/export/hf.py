"""Write one of our models as a Hugging Face folder: `config.json`, `model.safetensors`, given a
tokenizer `tokenizer.json` + `tokenizer_config.json`, and given a model card (`lmforge.export.card`)
`README.md`, loadable by `transformers`' `from_pretrained`.

Each architecture's two directions live in one module of `lmforge.hf` (bert, which writes RoFormer
too; gpt2, gpt_neox, llama, t5): beside the config reader and rename rules of the import, its
`*_mismatches` (the ModelConfig values it cannot express), `*_hf_config` (config.json) and
`*_tensors` (our state dict under HF names: the import's rename rules read backwards by
`lmforge.hf.rename`, T5's spelled out; reshaped where HF lays weights out otherwise). This module
holds their table, `EXPORTERS`, one `Exporter` per HF `model_type`. The first exporter that expresses
a config is used; none is one `DataError` line naming, per architecture, the first value it cannot
express. The three models of the default pipeline map to RoFormer (the BERT with rotary positions),
GPT-NeoX (a rotary, LayerNorm decoder with biases) and T5; BERT, GPT-2 and LLaMA/Mistral cover the
other presets. The importer (`lmforge.hf.load`) reads every one back, so `load_pretrained(export(m))`
rebuilds `m`.

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
from lmforge.hf.bert import bert_hf_config, bert_mismatches, bert_tensors
from lmforge.hf.common import HF_ACTIVATIONS, State, decoder_needs, one_kv_head_per_query
from lmforge.hf.gpt2 import gpt2_hf_config, gpt2_tensors
from lmforge.hf.gpt_neox import gpt_neox_hf_config, gpt_neox_tensors
from lmforge.hf.llama import llama_hf_config, llama_mismatches, llama_tensors
from lmforge.hf.t5 import t5_hf_config, t5_mismatches, t5_tensors
from lmforge.model.config import ModelConfig
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids


@dataclass(frozen=True)
class Exporter:
    model_type: str
    architecture: str  # the transformers class `from_pretrained` builds (config.json `architectures`)
    mismatches: Callable[[ModelConfig], list[str]]  # values this architecture cannot express
    config: Callable[[ModelConfig], dict[str, Any]]
    tensors: Callable[[State, ModelConfig], State]


EXPORTERS: tuple[Exporter, ...] = (
    Exporter("bert", "BertForMaskedLM", lambda c: bert_mismatches(c, "learned"),
             lambda c: bert_hf_config(c, "bert"), lambda s, c: bert_tensors(s, c, "bert")),
    Exporter("roformer", "RoFormerForMaskedLM", lambda c: bert_mismatches(c, "rope"),
             lambda c: bert_hf_config(c, "roformer"), lambda s, c: bert_tensors(s, c, "roformer")),
    Exporter("gpt2", "GPT2LMHeadModel",
             lambda c: decoder_needs(c, position="learned", norm="layer", activation=tuple(HF_ACTIVATIONS),
                                     bias=True) + one_kv_head_per_query(c),
             gpt2_hf_config, gpt2_tensors),
    Exporter("gpt_neox", "GPTNeoXForCausalLM",
             lambda c: decoder_needs(c, position="rope", norm="layer", activation=tuple(HF_ACTIVATIONS),
                                     bias=True) + one_kv_head_per_query(c),
             gpt_neox_hf_config, gpt_neox_tensors),
    Exporter("llama", "LlamaForCausalLM", lambda c: llama_mismatches(c, sliding=False),
             lambda c: llama_hf_config(c, sliding=False), llama_tensors),
    Exporter("mistral", "MistralForCausalLM", lambda c: llama_mismatches(c, sliding=True),
             lambda c: llama_hf_config(c, sliding=True), llama_tensors),
    Exporter("t5", "T5ForConditionalGeneration", t5_mismatches, t5_hf_config, t5_tensors),
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
    model: nn.Module, folder: str | Path, tokenizer_file: str | Path | None = None, card: str | None = None
) -> Exporter:
    """Write `model` (with `model.config`) as a Hugging Face folder, with `card` as its README.md. Every
    file is written into a temporary folder beside `folder`, which replaces it by renames only once
    complete: an error leaves the previous export as it was."""
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
        if card is not None:
            (staging / "README.md").write_text(card, encoding="utf-8")
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
