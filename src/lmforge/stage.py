"""A pipeline stage: its work function, the config it may read, and what its `run(cfg)` returns.

Each `pipelines/<stage>.py` entry point hands a `Stage` to `lmforge.tracking.execute`. A stage sees
only the config groups and top-level keys it declares in `reads`: they are validated when the stage
starts (one line naming the bad key, exit 2) and the work function gets a resolved copy holding
nothing else. A stage therefore cannot read a config file that its DVC dependencies do not list;
`tests/test_dvc_deps.py` checks `dvc.yaml` against these declarations, against the config files
Hydra composes for them and against each entry point's import closure under `src/`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from lmforge.errors import ConfigError


class StageResult(NamedTuple):
    metrics: dict[str, float]  # flat names -> numbers, ready for mlflow.log_metrics
    artifacts: list[str]  # every file the stage wrote, for mlflow.log_artifact


def seed_value(value: Any) -> int:
    """The top-level `seed`: an integer (Hydra passes `seed=abc` through as a string)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"seed: got {value!r}, expected an integer")
    return value


def run_name_value(value: Any) -> str:
    """The top-level `run_name`: names output folders, so a non-empty name without '/'."""
    if not isinstance(value, str) or not value or "/" in value or value in (".", ".."):
        raise ConfigError(f"run_name: got {value!r}, expected a non-empty folder name without '/'")
    return value


Validator = Callable[[Any], Any]
Check = Callable[[DictConfig], None]  # a rule across groups, on the validated view; raises ConfigError


@dataclass(frozen=True)
class Stage:
    name: str  # the DVC stage, or its foreach prefix: pretrain -> pretrain@<instance>
    work: Callable[[DictConfig], StageResult]  # run(cfg) on the visible config
    reads: Mapping[str, Validator]  # config group or top-level key -> its validator, called on its node
    instance_key: str | None = None  # dotted key whose value names the DVC instance, e.g. run_name
    will_resume: Callable[[DictConfig], bool] | None = None  # does this run continue an interrupted one?
    checks: tuple[Check, ...] = ()  # rules across groups (the schedule fits the run), after each group's
    owns: Callable[[DictConfig], list[str]] | None = None  # output folders this run takes for itself

    def resumes(self, view: DictConfig) -> bool:
        return bool(self.will_resume and self.will_resume(view))

    def label(self, cfg: DictConfig) -> str:
        """The DVC stage name of this run: `prepare`, `pretrain@decoder`, ...; for a stage that runs
        several instances in one multirun (`finetune`), the instance: `finetune@<row>`."""
        if self.instance_key is None:
            return self.name
        return f"{self.name}@{OmegaConf.select(cfg, self.instance_key)}"

    def visible(self, cfg: DictConfig) -> DictConfig:
        """The declared part of `cfg`, resolved and validated; reading anything else fails."""
        missing = [key for key in self.reads if key not in cfg]
        if missing:
            raise ConfigError(
                f"config: no '{missing[0]}' for stage {self.name}, expected the full lmforge config"
            )
        try:
            resolved = OmegaConf.to_container(cfg, resolve=True)
        except Exception as err:  # an interpolation to a missing key or env var
            raise ConfigError(f"config: {str(err).splitlines()[0]}") from None
        picked = {key: resolved[key] for key in self.reads}
        for key, validate in self.reads.items():
            validate(picked[key])
        view = OmegaConf.create(picked)
        OmegaConf.set_struct(view, True)  # a read of an undeclared key raises instead of returning None
        for check in self.checks:
            check(view)
        return view

    def folders(self, view: DictConfig) -> list[str]:
        """The output folders a run of this stage writes alone; `execute` locks them before it logs."""
        return self.owns(view) if self.owns else []

    def __call__(self, cfg: DictConfig) -> StageResult:
        return self.work(self.visible(cfg))
