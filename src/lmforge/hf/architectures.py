"""What each Hugging Face architecture is in `ModelConfig` terms, and where each of its tensors goes.

One `Architecture` record per `model_type` of a folder's config.json: `config` translates the HF
config into `ModelConfig` values (a setting our config cannot express raises one `DataError` line
naming it), `rules` rename tensor names (regex -> our name; `None` drops a tensor into `extra`, e.g.
BERT's pooler, which a classification head may reuse), `convert` reshapes what a rename cannot (GPT-2
stores Conv1D weights transposed and fuses q, k, v). No code elsewhere branches on the architecture.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from lmforge.hf import bert, gpt2, gpt_neox, llama, roformer, t5
from lmforge.hf.common import Rules


@dataclass(frozen=True)
class Architecture:
    config: Callable[[dict[str, Any], set[str]], dict[str, Any]]  # (config.json, tensor names) -> values
    rules: Rules
    prefixes: tuple[str, ...] = ()  # stripped from HF names first (bert., transformer., model.)
    # (tensors, config.json) -> tensors: what a rename cannot do
    convert: Callable[[dict[str, torch.Tensor], dict[str, Any]], dict[str, torch.Tensor]] = field(
        default=lambda state, hf: state
    )


ARCHITECTURES: dict[str, Architecture] = {
    "bert": Architecture(bert.bert_config, bert.BERT_RULES, prefixes=("bert.",)),
    "gpt2": Architecture(
        gpt2.gpt2_config, gpt2.GPT2_RULES, prefixes=("transformer.",), convert=gpt2.gpt2_convert
    ),
    "gpt_neox": Architecture(
        gpt_neox.gpt_neox_config,
        gpt_neox.GPT_NEOX_RULES,
        prefixes=("gpt_neox.",),
        convert=gpt_neox.gpt_neox_convert,
    ),
    "llama": Architecture(llama.llama_config, llama.LLAMA_RULES, prefixes=("model.",)),
    "mistral": Architecture(llama.llama_config, llama.LLAMA_RULES, prefixes=("model.",)),
    "roformer": Architecture(
        roformer.roformer_config,
        roformer.ROFORMER_RULES,
        prefixes=("roformer.",),
        convert=roformer.roformer_convert,
    ),
    "t5": Architecture(t5.t5_config, t5.T5_RULES),
}
