"""A pipeline stage: its work function, the config it may read, and what its `run(cfg)` returns.

Each `pipelines/<stage>.py` entry point hands a `Stage` to `lmforge.door.execute`. A stage sees
only the config groups and top-level keys it declares in `reads`: each is validated once, when the
stage starts (one line naming the bad key, exit 2), into its typed value (a dataclass per group), and
the work function gets those values as a `Plan`, holding nothing else. Nothing below the stage door
parses a config again: a default lives in its dataclass, a range check in its `__post_init__`. A stage therefore cannot read a config file that its DVC dependencies do not list;
`tests/test_dvc_deps.py` checks `dvc.yaml` against these declarations, against the config files
Hydra composes for them and against each entry point's import closure under `src/`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from lmforge.errors import ConfigError


class Plan:
    """A stage's validated config: `plan.<key>` is what the key's validator returned (a dataclass for
    a group, a plain value for a top-level key such as `seed`); `plan.values` is the resolved plain
    mapping they came from, for what records a run's config as written (MLflow params, fingerprints)."""

    __slots__ = ("_parsed", "values")

    def __init__(self, parsed: Mapping[str, Any], values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_parsed", dict(parsed))
        object.__setattr__(self, "values", values)

    def __getattr__(self, key: str) -> Any:
        try:
            return self._parsed[key]
        except KeyError:
            raise AttributeError(
                f"the stage does not read '{key}'; it reads {', '.join(self._parsed)}"
            ) from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"a plan is read-only: cannot set '{key}'")

    def __contains__(self, key: str) -> bool:
        return key in self._parsed


class TrainedModel(NamedTuple):
    """The model a training stage ends with, for MLflow to log once (`lmforge.serving`)."""

    checkpoint: str  # a pretraining or fine-tuning checkpoint, read with weights_only=True
    tokenizer: str  # its tokenizer.json
    family: str  # encoder, decoder or encoder_decoder: what `predict` does with a text
    example: dict[str, str] | None = None  # an input row (column -> text); None: the family's sentence


class DataInput(NamedTuple):
    """A dataset a run read, for MLflow's run inputs."""

    source: str  # the folder or file it came from
    files: tuple[str, ...]  # the files whose bytes make its digest
    rows: int  # documents, examples or sentence pairs


class StageResult(NamedTuple):
    metrics: dict[str, float]  # flat names -> numbers, ready for mlflow.log_metrics
    artifacts: list[str]  # the reports and figures the stage wrote, for mlflow.log_artifact
    params: dict[
        str, Any
    ] = {}  # values the run decided beyond its config (the model as built), logged as params
    model: TrainedModel | None = None  # a training stage's final model, logged as an MLflow model
    inputs: dict[str, DataInput] = {}  # dataset context (train, val, test) -> what it read


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists become strings (MLflow params are flat key/values)."""
    if isinstance(values, dict):
        out: dict[str, Any] = {}
        for key, value in values.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): values if not isinstance(values, list) else str(values)}


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
Check = Callable[[Plan], None]  # a rule across groups, on the validated plan; raises ConfigError


@dataclass(frozen=True)
class Stage:
    name: str  # the DVC stage, or its foreach prefix: pretrain -> pretrain@<instance>
    work: Callable[[Plan], StageResult]  # run(plan) on the validated config
    reads: Mapping[str, Validator]  # config group or top-level key -> its validator: node -> typed value
    instance_key: str | None = None  # dotted key whose value names the DVC instance, e.g. run_name
    will_resume: Callable[[Plan], bool] | None = None  # does this run continue an interrupted one?
    checks: tuple[Check, ...] = ()  # rules across groups (the schedule fits the run), after each group's
    owns: Callable[[Plan], list[str]] | None = None  # output folders this run takes for itself
    extends: Callable[[Plan], str | None] | None = None  # the output folder of a run this one continues
    evaluates: Callable[[Plan], str | None] | None = None  # the output folder of the run it evaluates
    score: tuple[str, str] | None = None  # (metric, "min" or "max"): ranks the evaluated run's model
    starts_from: Callable[[Plan], str | None] | None = None  # the output folder of the model it starts from
    registers: Callable[[Plan], str] | None = None  # registry name of its own model, ranked by `score`

    def resumes(self, plan: Plan) -> bool:
        return bool(self.will_resume and self.will_resume(plan))

    def label(self, cfg: DictConfig) -> str:
        """The DVC stage name of this run: `prepare`, `pretrain@decoder`, ...; for a stage that runs
        several instances in one multirun (`finetune`), the instance: `finetune@<row>`."""
        if self.instance_key is None:
            return self.name
        return f"{self.name}@{OmegaConf.select(cfg, self.instance_key)}"

    def visible(self, cfg: DictConfig) -> Plan:
        """The declared part of `cfg`, resolved and validated into its typed values."""
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
        plan = Plan({key: validate(picked[key]) for key, validate in self.reads.items()}, picked)
        for check in self.checks:
            check(plan)
        return plan

    def folders(self, plan: Plan) -> list[str]:
        """The output folders a run of this stage writes alone; `execute` locks them before it logs."""
        return self.owns(plan) if self.owns else []

    def __call__(self, cfg: DictConfig) -> StageResult:
        return self.work(self.visible(cfg))
