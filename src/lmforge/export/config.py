"""Structured config of the `export` group, validated when the export stage starts."""

from __future__ import annotations

from dataclasses import dataclass

from lmforge.errors import ConfigError
from lmforge.structured import Group, rooted


@dataclass(frozen=True)
class ExportConfig:
    run: str = "decoder"  # the pretrain run: {models_dir}/{run}/{checkpoint}.ckpt -> {out_dir}/{run}/
    checkpoint: str = "best"
    models_dir: str = rooted("artifacts/pretrain", "${paths.artifacts}/pretrain")
    out_dir: str = rooted("artifacts/hf", "${paths.artifacts}/hf")
    reports_dir: str = rooted("reports/export", "${paths.reports}/export")  # {reports_dir}/{run}.json
    # The model card's facts: the evaluate stage's {eval_dir}/{run}.json and the prepare stage's data card.
    eval_dir: str = rooted("reports/eval", "${paths.reports}/eval")
    data_card: str = rooted("reports/data_card.md", "${paths.reports}/data_card.md")
    # The check against transformers: logits on windows of the test split, greedy continuations.
    windows: int = 8  # test windows of `length` tokens
    length: int = 64
    prompts: int = 4  # decoders and encoder-decoders: greedy continuations of this many prompts
    prompt_length: int = 16
    new_tokens: int = 16
    tolerance: float = 1e-4  # largest |logit difference| a faithful export may show (float32 kernels differ)

    def __post_init__(self) -> None:
        for name in ("run", "checkpoint"):
            value = getattr(self, name)
            if not value or "/" in value:
                raise ConfigError(f"export.{name}: got {value!r}, expected a non-empty name without '/'")
        for name in ("windows", "length", "prompts", "prompt_length", "new_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"export.{name}: got {getattr(self, name)}, expected an integer >= 1")
        if self.prompt_length >= self.length:
            raise ConfigError(
                f"export.prompt_length: got {self.prompt_length}, expected fewer than export.length={self.length}"
            )
        if not self.tolerance > 0:
            raise ConfigError(f"export.tolerance: got {self.tolerance}, expected a number > 0")


export_config = Group(ExportConfig, "export")
