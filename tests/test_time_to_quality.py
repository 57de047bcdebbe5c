"""The time-to-quality benchmark's arithmetic and inputs, and the knob study's table, against hand
computations (the benchmark itself times training and runs in `python -m benchmarks`)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lmforge.curves import read_val_curve, steps_to
from lmforge.timings import write_timings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def ttq(monkeypatch):
    """benchmarks/time_to_quality.py, imported as `python -m benchmarks` does (from the repository root)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("benchmarks.time_to_quality")


def test_read_val_curve_keeps_file_order(tmp_path):
    path = tmp_path / "val_loss.csv"
    path.write_text("step,val_loss,val_accuracy\n100,7.5,0.05\n200,6.25,0.125\n")
    assert read_val_curve(path) == [(100, 7.5), (200, 6.25)]


def test_steps_to_interpolates_the_first_crossing():
    curve = [(100, 7.0), (200, 6.0), (300, 5.0), (400, 5.5)]
    assert steps_to(curve, 6.5) == pytest.approx(150.0)  # halfway between 7.0 at 100 and 6.0 at 200
    assert steps_to(curve, 5.0) == pytest.approx(300.0)  # reached exactly at an evaluation
    assert steps_to(curve, 7.5) == 100.0  # below the target at the first evaluation
    assert steps_to(curve, 4.9) is None  # never reached


def test_every_recipe_names_the_same_groups_and_tokenizer_per_family(ttq):
    found = ttq.recipes()
    assert set(found) == {"encoder", "decoder"}
    for family, by_name in found.items():
        assert set(by_name) == {"default", *ttq.OLDER}, family
        for old in ttq.OLDER:
            assert set(by_name["default"]) == set(by_name[old]), family
            assert by_name["default"]["tokenizer"] == by_name[old]["tokenizer"], family  # losses in one unit
        assert by_name["v1"] not in (by_name["default"], by_name["v2"]), family


def test_recipe_table_lists_each_run_with_its_curve(tmp_path):
    run = tmp_path / "optim.lr=0.002" / "reports"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"steps": 200}))
    write_timings(run, {"wall_seconds": 100.0})  # the clock is kept apart from the metrics
    (run / "val_loss.csv").write_text("step,val_loss,val_accuracy\n100,7.5,0.05\n200,6.25,0.125\n")
    out = subprocess.run(
        [sys.executable, "scripts/recipe_table.py", "--root", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "| `optim.lr=0.002` | 7.500 | 6.250 | 12.5% | 0.50 |" in out
    compact = subprocess.run(
        [sys.executable, "scripts/recipe_table.py", "--root", str(tmp_path), "--compact", "--target", "7"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # 7.0 lies 40% of the way from 7.5 (step 100) to 6.25 (step 200)
    assert "| `optim.lr=0.002` | 200 | 6.250 (200) | 6.250 (200) | 12.5% | 140 |" in compact
    empty = subprocess.run(
        [sys.executable, "scripts/recipe_table.py", "--root", str(tmp_path / "none")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert empty.returncode == 2 and empty.stderr.count("\n") == 1
    alone = subprocess.run(
        [sys.executable, "scripts/recipe_table.py", "--root", str(tmp_path), "--target", "7"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert alone.returncode == 2 and alone.stderr.count("\n") == 1 and "--compact" in alone.stderr


def test_every_knob_study_grid_command_is_a_valid_pretrain_plan():
    """scripts/recipe_grid.py prints the commands behind docs/pretraining.md's GPU rounds: each must
    compose and validate as the pretrain stage would run it (a renamed preset or field fails here)."""
    import shlex

    from hydra import compose, initialize_config_dir

    from scripts import recipe_grid as grid

    pretrain = _load_pipeline("pretrain")
    commands = grid.round_1() + grid.round_2()
    assert len(commands) == 96
    names = set()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        for line in commands:
            words = shlex.split(line.split(" > ")[0].split(" && ", 1)[1])
            assert words[:2] == ["python", "pipelines/pretrain.py"], line
            plan = pretrain.STAGE.visible(compose(config_name="config", overrides=words[2:]))
            names.add(plan.run_name)
    assert len(names) == len(commands)  # every run writes its own folder


def _load_pipeline(name: str):
    return importlib.import_module(f"pipelines.{name}")
