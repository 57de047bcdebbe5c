"""Structured config of the `arch` group, validated when the arch_eval stage starts."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmforge.errors import ConfigError
from lmforge.structured import Group, rooted


@dataclass(frozen=True)
class ArchConfig:
    # the pretrain stage's folders: {models_dir}/{run}/best.ckpt, {pretrain_reports}/{run}/metrics.json
    models_dir: str = rooted("artifacts/pretrain", "${paths.artifacts}/pretrain")
    pretrain_reports: str = rooted("reports/pretrain", "${paths.reports}/pretrain")
    # each comparison's runs, the reference first
    positions: list[str] = field(
        default_factory=lambda: ["arch_learned", "arch_sinusoidal", "arch_rope", "arch_alibi"]
    )
    kv_heads: list[str] = field(default_factory=lambda: ["arch_rope", "arch_gqa2", "arch_mqa"])
    norms: list[str] = field(default_factory=lambda: ["arch_rope", "arch_rms"])
    lengths: list[int] = field(default_factory=lambda: [128, 256, 512])  # test windows, tokens
    max_windows: int | None = None  # per length; null -> every window of the test split
    batch_size: int = 16
    prompt_tokens: int = 16  # decoding speed: a prompt of this many test tokens ...
    new_tokens: int = 240  # ... continued greedily by this many, with and without the KV cache
    decode_batch: int = 8
    repeats: int = 5  # timings: the median of this many interleaved repeats
    out_dir: str = rooted("reports/arch", "${paths.reports}/arch")

    def __post_init__(self) -> None:
        for name in ["positions", "kv_heads", "norms"]:
            if len(getattr(self, name)) < 2:
                raise ConfigError(
                    f"arch.{name}: got {getattr(self, name)}, expected a reference run and at least one more"
                )
        if not self.lengths or sorted(set(self.lengths)) != list(self.lengths) or self.lengths[0] < 2:
            raise ConfigError(f"arch.lengths: got {self.lengths}, expected increasing window lengths >= 2")
        if self.max_windows is not None and self.max_windows < 1:
            raise ConfigError(f"arch.max_windows: got {self.max_windows}, expected null or an integer >= 1")
        for name in ["batch_size", "prompt_tokens", "new_tokens", "decode_batch", "repeats"]:
            if getattr(self, name) < 1:
                raise ConfigError(f"arch.{name}: got {getattr(self, name)}, expected an integer >= 1")


arch_config = Group(ArchConfig, "arch")
