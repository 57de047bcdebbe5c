"""Each default lives in one place, its dataclass: conf/<group>/base.yaml is written from it
(scripts/conf_bases.py) and every preset of the group builds on `base`, listing only what it
changes. These tests fail when a base.yaml is stale, when a preset does not reach `base`, or when a
preset restates a value it already inherits."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from helpers import preset, preset_parents
from scripts import conf_bases

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


@pytest.fixture(scope="module")
def generator():
    return conf_bases


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def restated(path: Path) -> list[str]:
    """The keys of a preset (but its `name`) whose value equals what it inherits."""
    before = OmegaConf.to_container(preset(path, own=False))
    return [
        k for k, v in _load(path).items() if k not in ("name", "defaults") and k in before and before[k] == v
    ]


def reaches_base(path: Path) -> bool:
    parents = preset_parents(path)
    return "base" in parents or any(reaches_base(path.parent / f"{p}.yaml") for p in parents)


def presets(groups) -> list[Path]:
    return [p for name in groups for p in sorted((CONF / name).glob("*.yaml")) if p.stem != "base"]


def test_every_parsed_group_has_a_base_written_from_its_dataclass(generator):
    groups = generator.groups()
    assert {"optim", "trainer", "model", "data", "tokenizer", "task", "finetune"} <= set(groups)
    for name, group in groups.items():
        assert (CONF / name / "base.yaml").read_text() == generator.render(group), (
            f"conf/{name}/base.yaml disagrees with {group.schema.__name__}: run `python -m scripts.conf_bases`"
        )


def test_every_preset_builds_on_base_and_lists_only_what_it_changes(generator):
    for path in presets(generator.groups()):
        assert reaches_base(path), f"{path.relative_to(ROOT)}: its defaults list does not reach base"
        assert not restated(path), f"{path.relative_to(ROOT)} restates inherited values of {restated(path)}"


def test_the_checks_catch_a_restated_default_and_a_preset_without_base(tmp_path):
    group = tmp_path / "optim"
    group.mkdir()
    (group / "base.yaml").write_text("name: adamw\nlr: 0.002\neps: 1.0e-08\n")
    (group / "fast.yaml").write_text("defaults:\n  - base\n  - _self_\nname: fast\nlr: 0.01\neps: 1.0e-08\n")
    (group / "loose.yaml").write_text("name: loose\nlr: 0.01\n")
    assert restated(group / "fast.yaml") == ["eps"]
    assert reaches_base(group / "fast.yaml") and not reaches_base(group / "loose.yaml")


def test_a_default_changed_in_the_dataclass_reaches_the_composed_config(generator):
    """The composed config holds every field (so any field overrides without `+`), at the value the
    dataclass gives it: the optimiser's epsilon is named nowhere in conf/optim/adamw.yaml."""
    from hydra import compose, initialize_config_dir

    from lmforge.training.config import OptimConfig

    assert "eps" not in _load(CONF / "optim" / "adamw.yaml")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["optim.eps=1e-6"])
    assert cfg.optim.eps == 1e-6 and cfg.optim.lr == OptimConfig().lr
