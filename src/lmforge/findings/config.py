"""Structured config of the `findings` group: where the evidence lies and the margins the rules use."""

from __future__ import annotations

from dataclasses import dataclass

from lmforge.errors import ConfigError
from lmforge.structured import Group, rooted


@dataclass(frozen=True)
class FindingsConfig:
    reports_dir: str = rooted("reports", "${paths.reports}")  # every stage's reports, read-only
    # the experiments pipeline's lock: it pins (md5) each experiment report the findings read
    experiments_lock: str = "pipelines/experiments/dvc.lock"
    # the experiments that lag the code (`make status` writes it): what read them is marked stale
    experiments_stale: str = "pipelines/experiments/stale.json"
    out: str = rooted("reports/findings.md", "${paths.reports}/findings.md")  # + .json and a figure folder
    retention_floor: float = 0.9  # "keeps most of its teacher": the retention interval lies above this
    lora_margin: float = (
        0.03  # "approaches full fine-tuning": within this many points (the summaries' margin)
    )
    loss_margin: float = (
        0.05  # "at small loss cost" (GQA, RMSNorm): the loss increase's interval stays below (nats)
    )
    kv_speedup_floor: float = 1.2  # "the KV cache speeds decoding": above host drift (+-20%)
    # "RMSNorm is faster": its train step at least this many times faster than LayerNorm's. The steps
    # are timed interleaved in one process (arch_eval), so drift is far below +-20%, but two runs of the
    # same pair measured 1.00x and 0.98x: a few percent is noise, not speed.
    norm_speedup_floor: float = 1.05
    induction_gain_floor: float = (
        0.5  # induction: the second copy's loss at least this much below the first (nats)
    )
    chinchilla_tokens_per_parameter: float = 20.0  # Hoffmann et al. 2022, for comparison only

    def __post_init__(self) -> None:
        for name in ["lora_margin", "loss_margin", "induction_gain_floor", "chinchilla_tokens_per_parameter"]:
            if getattr(self, name) <= 0:
                raise ConfigError(f"findings.{name}: got {getattr(self, name)}, expected a number > 0")
        if not 0.0 < self.retention_floor <= 1.0:
            raise ConfigError(
                f"findings.retention_floor: got {self.retention_floor}, expected a value in (0, 1]"
            )
        for name in ["kv_speedup_floor", "norm_speedup_floor"]:
            if getattr(self, name) < 1.0:
                raise ConfigError(f"findings.{name}: got {getattr(self, name)}, expected a ratio >= 1")


findings_config = Group(FindingsConfig, "findings")
