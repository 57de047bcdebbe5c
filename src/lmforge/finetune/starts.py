"""Where fine-tuning starts: one entry per `finetune.init` kind, each giving the backbone's config,
its weights (None: random) and the tokenizer it reads text with.

    pretrained   artifacts/pretrain/<backbone>/best.ckpt (read with weights_only=True) + the tokenizer
                 it was pretrained with
    scratch      the same architecture and tokenizer, random weights: what pretraining is compared to
    hf           a Hugging Face-format folder (`lmforge.hf.load_pretrained`: strict, by-name weight
                 mapping, one line for an architecture ModelConfig cannot express) and its tokenizer.json
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from lmforge.errors import DataError
from lmforge.finetune.config import FinetuneConfig
from lmforge.model.config import ModelConfig, load_model_config
from lmforge.tokenizer.specials import load_tokenizer
from lmforge.training.checkpoints import load_module


@dataclass
class Start:
    config: ModelConfig
    state: dict[str, torch.Tensor] | None  # backbone weights by our parameter names; None: random
    tokenizer: Tokenizer
    source: str  # where it came from, for the report
    model: str  # a short name for the summary: the pretrain run or the folder's name


def _overridden(values: dict[str, Any], cfg: FinetuneConfig) -> ModelConfig:
    if cfg.dropout is not None:
        values = {
            **values,
            "dropout": cfg.dropout,
            "embedding_dropout": cfg.dropout,
            "attention_dropout": cfg.dropout,
        }
    return load_model_config(values)


def _ours(cfg: FinetuneConfig, with_weights: bool) -> Start:
    path = Path(cfg.checkpoint_dir) / cfg.backbone / "best.ckpt"
    pretrain = load_module(path)  # the PretrainModule it was saved from: weights_only, strict
    state = pretrain.model.state_dict() if with_weights else None  # the network; the NSP head is dropped
    tokenizer = load_tokenizer(Path(cfg.tokenizer_dir) / cfg.tokenizer / "tokenizer.json")
    kind = "pretrain" if with_weights else "random init, architecture of pretrain"
    values = pretrain.model_config.to_dict()
    return Start(_overridden(values, cfg), state, tokenizer, f"{kind}@{cfg.backbone} ({path})", cfg.backbone)


def pretrained(cfg: FinetuneConfig) -> Start:
    return _ours(cfg, with_weights=True)


def scratch(cfg: FinetuneConfig) -> Start:
    return _ours(cfg, with_weights=False)


def hf(cfg: FinetuneConfig) -> Start:
    from lmforge.hf.load import load_pretrained
    from lmforge.hf.packages import model_folder

    folder = model_folder(cfg.hf_source or "", cfg.hf_cache, "finetune.init")
    loaded = load_pretrained(folder)
    if loaded.tokenizer_file is None:
        raise DataError(f"hf folder {folder}: no tokenizer.json; expected the model's tokenizer beside it")
    config = _overridden(loaded.config.to_dict(), cfg)
    return Start(
        config,
        loaded.model.state_dict(),
        load_tokenizer(loaded.tokenizer_file),
        f"hf:{folder}",
        cfg.hf_source or folder.name,
    )


STARTS: dict[str, Callable[[FinetuneConfig], Start]] = {
    "pretrained": pretrained,
    "scratch": scratch,
    "hf": hf,
}


def start(cfg: FinetuneConfig) -> Start:
    return STARTS[cfg.init.split(":", 1)[0]](cfg)
