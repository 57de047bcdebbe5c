"""A pipeline stage: its work function, the config it may read, and what its `run(cfg)` returns.

Each `pipelines/<stage>.py` entry point hands a `Stage` to `lmforge.door.execute`. A stage sees
only the config groups and top-level keys its plan declares, one `read(validator)` field each: each is
validated once, when the stage starts (one line naming the bad key, exit 2), into its typed value (a
frozen dataclass per group), and the work function gets them as that frozen `Plan` dataclass, holding
nothing else. Nothing below the stage door parses a config again: a default lives in its dataclass,
a range check in its `__post_init__`. A stage therefore cannot read a config file that its DVC
dependencies do not list;
`tests/test_dvc_deps.py` checks `dvc.yaml` against these declarations, against the config files
Hydra composes for them and against each entry point's import closure under `src/`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Generic, NamedTuple, TypeVar

from omegaconf import DictConfig, OmegaConf

from lmforge.errors import ConfigError

Validator = Callable[[Any], Any]


READ = "lmforge.read"  # a plan field's metadata key: the validator of the config key it is named after


def read(validator: Validator) -> Any:
    """A plan's field: the config group or top-level key of the field's name, validated at the stage
    door by `validator` (node -> typed value: a `Group` for a group, `seed_value` for `seed`)."""
    return field(metadata={READ: validator})


@dataclass(frozen=True, kw_only=True, eq=False)
class Plan:
    """A stage's validated config. Each stage's plan subclasses this with one `read(...)` field per
    config group or top-level key it reads, typed as its validator's result (a frozen dataclass for a
    group, a plain value for `seed`), so a type checker follows `plan.optim.lr` down to `OptimConfig`.
    `values` is the resolved plain mapping the fields came from, for what records a run's config as
    written (MLflow params, fingerprints). A plan is one run's, compared and hashed by identity
    (`eq=False`, in each subclass too): what is computed once per run is cached on it."""

    values: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def reads(cls) -> dict[str, Validator]:
        """{config key: validator} of this plan's fields, in declaration order."""
        return {f.name: f.metadata[READ] for f in fields(cls) if READ in f.metadata}


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


P = TypeVar("P", bound=Plan)


@dataclass(frozen=True)
class Stage(Generic[P]):
    name: str  # the DVC stage, or its foreach prefix: pretrain -> pretrain@<instance>
    work: Callable[[P], StageResult]  # run(plan) on the validated config
    plan: type[P]  # its fields name what the stage reads and how each is validated (`read`)
    instance_key: str | None = None  # dotted key whose value names the DVC instance, e.g. run_name
    will_resume: Callable[[P], bool] | None = None  # does this run continue an interrupted one?
    checks: tuple[Callable[[P], None], ...] = ()  # rules across groups (the schedule fits the run)
    owns: Callable[[P], list[str]] | None = None  # output folders this run takes for itself
    extends: Callable[[P], str | None] | None = None  # the output folder of a run this one continues
    evaluates: Callable[[P], str | None] | None = None  # the output folder of the run it evaluates
    score: tuple[str, str] | None = None  # (metric, "min" or "max"): ranks the evaluated run's model
    starts_from: Callable[[P], str | None] | None = None  # the output folder of the model it starts from
    registers: Callable[[P], str] | None = None  # registry name of its own model, ranked by `score`
    # keys of a group it reads that the stage decides itself (key -> what decides it): fine-tuning's
    # loop length is finetune.max_steps, not trainer.max_steps; the door refuses an override of one
    decided: Mapping[str, str] = field(default_factory=dict)

    @property
    def reads(self) -> dict[str, Validator]:
        """Config group or top-level key -> its validator (node -> typed value), from the plan."""
        return self.plan.reads()

    def resumes(self, plan: P) -> bool:
        return bool(self.will_resume and self.will_resume(plan))

    def label(self, cfg: DictConfig) -> str:
        """The DVC stage name of this run: `prepare`, `pretrain@decoder`, ...; for a stage that runs
        several instances in one multirun (`finetune`), the instance: `finetune@<row>`."""
        if self.instance_key is None:
            return self.name
        return f"{self.name}@{OmegaConf.select(cfg, self.instance_key)}"

    def visible(self, cfg: DictConfig) -> P:
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
        plan = self.plan(
            values=picked, **{key: validate(picked[key]) for key, validate in self.reads.items()}
        )
        for check in self.checks:
            check(plan)
        return plan

    def folders(self, plan: P) -> list[str]:
        """The output folders a run of this stage writes alone; `execute` locks them before it logs."""
        return self.owns(plan) if self.owns else []

    def __call__(self, cfg: DictConfig) -> StageResult:
        return self.work(self.visible(cfg))
