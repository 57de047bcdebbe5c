"""The stage door: each stage's config is validated once, into typed values, and nothing below it
sees a Hydra/OmegaConf config again.

- Every entry point's `Stage.visible` turns its composed default config into a `Plan` whose members
  are dataclasses (one per group) or plain values, all the way down: no DictConfig/ListConfig left for
  a module below the door to parse again, and `plan.values` is plain Python for MLflow params.
- Statically: under src/lmforge only the door (stage.py, door.py, structured.py) and the run it hands the config to (tracking/runs.py) import anything
  of omegaconf but `MISSING`, the marker schemas use for a required field.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import Container

import pipelines
from helpers import SeedPlan, entry_stage
from lmforge.errors import ConfigError
from lmforge.stage import Plan, run_name_value, seed_value
from lmforge.structured import Group
from lmforge.tasks.registry import SOURCES

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "lmforge"
DOOR = {"stage.py", "door.py", "structured.py", "tracking/runs.py"}
ENTRY_POINTS = sorted(pipelines.STAGES)


def config_name(script: str) -> str:
    """The primary config its entry point composes, as the registry names it."""
    return pipelines.STAGES[script]


def cli_call(path: Path) -> ast.Call | None:
    """The entry point's `cli(STAGE, __file__, "<primary config>")` call, if any."""
    calls = [
        n
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "cli"
    ]
    return calls[0] if len(calls) == 1 else None


def test_the_registry_is_the_folder():
    """pipelines/ holds stage entry points only, each registered with the primary config its door
    composes (scripts/dvc_yaml.py refuses a command that runs anything else)."""
    files = {p.stem for p in (ROOT / "pipelines").glob("*.py") if p.name != "__init__.py"}
    assert files == set(pipelines.STAGES)
    for name, primary in pipelines.STAGES.items():
        call = cli_call(ROOT / "pipelines" / f"{name}.py")
        assert call is not None and [a.value for a in call.args[2:]] == [primary], name
    with pytest.raises(KeyError, match="not a stage entry point"):
        pipelines.stage("conf_bases")


def holds_a_config(value, path: str = "plan") -> list[str]:
    """Where an OmegaConf container hides in `value` (dataclass fields, mappings and lists walked)."""
    if isinstance(value, Container):
        return [path]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            p
            for f in dataclasses.fields(value)
            for p in holds_a_config(getattr(value, f.name), f"{path}.{f.name}")
        ]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in holds_a_config(v, f"{path}[{k!r}]")]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in holds_a_config(v, f"{path}[{i}]")]
    return []


def test_every_entry_point_is_covered():
    assert {"pretrain", "finetune", "distill", "translate_train", "scaling_sweep", "prepare"} <= set(
        ENTRY_POINTS
    )


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_the_door_hands_typed_values_and_nothing_of_hydra(script):
    stage = entry_stage(script)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name=config_name(script), overrides=["experiment=smoke"])
    plan = stage.visible(cfg)
    assert type(plan) is stage.plan
    assert hash(plan) == hash(plan) and plan != stage.visible(cfg)  # one run's: hashed by identity
    for key in stage.reads:
        value = getattr(plan, key)
        assert not holds_a_config(value, key), holds_a_config(value, key)
        if isinstance(plan.values[key], dict):  # a group: its dataclass, not a mapping to parse again
            assert dataclasses.is_dataclass(value), f"{script}: plan.{key} is {type(value).__name__}"
            field = dataclasses.fields(value)[0].name  # frozen: no module below the door can change it
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(value, field, getattr(value, field))
    assert not holds_a_config(plan.values, "values")


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_each_plan_is_a_frozen_dataclass_typed_as_what_its_fields_read(script):
    """A type checker follows `plan.<key>` to its dataclass: each field is annotated with the type its
    validator returns (a group's schema, `int` for the seed, `str` for the run name), and the plan
    has no field but what the stage reads and the plain `values`."""
    stage = entry_stage(script)
    assert dataclasses.is_dataclass(stage.plan) and stage.plan.__dataclass_params__.frozen
    hints = typing.get_type_hints(stage.plan)
    assert {f.name for f in dataclasses.fields(stage.plan)} == {*stage.reads, "values"}
    for key, validator in stage.reads.items():
        expected = validator.schema if isinstance(validator, Group) else SCALARS[validator]
        assert hints[key] is expected, f"{script}: plan.{key} is annotated {hints[key]}, reads {expected}"


SCALARS = {seed_value: int, run_name_value: str}


def test_a_plan_is_read_only_and_has_only_its_fields():
    plan = SeedPlan(seed=1, values={"seed": 1})
    assert plan.seed == 1 and SeedPlan.reads() == {"seed": int}
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="'model'"):
        _ = plan.model  # type: ignore[attr-defined]
    assert "__getattr__" not in vars(Plan)  # the plan is typed, not a bag


def test_a_bad_value_is_refused_at_the_door():
    stage = entry_stage("pretrain")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=smoke", "optim.lr=-1"])
    with pytest.raises(ConfigError, match="optim.lr"):
        stage.visible(cfg)


def omegaconf_imports(path: Path) -> list[str]:
    """`file:line name` of each name imported from omegaconf, `MISSING` aside."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "omegaconf":
            found += [f"{path.name}:{node.lineno} {a.name}" for a in node.names if a.name != "MISSING"]
        elif isinstance(node, ast.Import):
            found += [
                f"{path.name}:{node.lineno} {a.name}" for a in node.names if a.name.startswith("omegaconf")
            ]
    return found


def test_only_the_door_touches_omegaconf():
    below = {
        str(p.relative_to(SRC)): hits
        for p in sorted(SRC.rglob("*.py"))
        if str(p.relative_to(SRC)) not in DOOR and (hits := omegaconf_imports(p))
    }
    assert not below, f"modules below the stage door import omegaconf: {below}"


def test_the_import_check_can_fail(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from omegaconf import MISSING, OmegaConf\nimport omegaconf.errors\n")
    assert omegaconf_imports(module) == ["m.py:1 OmegaConf", "m.py:2 omegaconf.errors"]


def test_the_task_stage_reads_its_sources_params_as_their_dataclass():
    """No module below the door validates a dict: the task source's `params` are parsed at the door
    into the dataclass its registry entry names; a key it does not know is one line there."""
    stage = entry_stage("task")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=smoke"])
        bad = compose(config_name="config", overrides=["experiment=smoke", "+task.params.colour=red"])
    params = stage.visible(cfg).task.params
    assert dataclasses.is_dataclass(params) and type(params) is SOURCES[cfg.task.source].params
    with pytest.raises(ConfigError, match=r"task.params \(\w+\).*colour"):
        stage.visible(bad)
