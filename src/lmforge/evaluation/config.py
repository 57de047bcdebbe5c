"""Structured config of the `eval` group, validated when the evaluate stage starts."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmforge.errors import ConfigError
from lmforge.structured import Group


@dataclass(frozen=True)
class SamplesConfig:
    """Decoder continuations of fixed prompts, decoded with the KV cache."""

    prompts: list[str] = field(default_factory=lambda: ["The jury said"])
    max_new_tokens: int = 40  # tokens generated per prompt
    temperature: float = 0.8  # the sampled decoding; greedy is always written beside it
    top_k: int | None = 50  # keep the k most likely tokens; null -> all
    top_p: float | None = 0.95  # nucleus: smallest set with this much probability; null -> all
    seed: int = 0  # the sampling generator's seed

    def __post_init__(self) -> None:
        if not self.prompts:
            raise ConfigError("eval.samples.prompts: got an empty list, expected at least one prompt")
        if self.max_new_tokens < 1:
            raise ConfigError(f"eval.samples.max_new_tokens: got {self.max_new_tokens}, expected >= 1")
        if self.temperature <= 0:
            raise ConfigError(f"eval.samples.temperature: got {self.temperature}, expected a number > 0")
        if self.top_k is not None and self.top_k < 1:
            raise ConfigError(f"eval.samples.top_k: got {self.top_k}, expected null or an integer >= 1")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"eval.samples.top_p: got {self.top_p}, expected null or a value in (0, 1]")


@dataclass(frozen=True)
class EvalConfig:
    reports_dir: str = "reports/eval"  # {run_name}.json metrics; {run_name}/ samples and plots
    max_batches: int | None = None  # cap on test batches; null -> the whole test split
    # the unigram baseline counts the targets of at most this many training examples, evenly spaced
    # (Brown's ~11,400 blocks of 128 are all counted), so its cost stays flat as the corpus grows;
    # null -> every training example
    baseline_windows: int | None = 16384
    samples: SamplesConfig = field(default_factory=SamplesConfig)

    def __post_init__(self) -> None:
        if self.baseline_windows is not None and self.baseline_windows < 1:
            raise ConfigError(
                f"eval.baseline_windows: got {self.baseline_windows}, expected null or an integer >= 1"
            )
        if self.max_batches is not None and self.max_batches < 1:
            raise ConfigError(f"eval.max_batches: got {self.max_batches}, expected null or an integer >= 1")


eval_config = Group(EvalConfig, "eval")
