"""A fine-tuning grid decided on validation (lmforge.finetune.grid) on rows written by hand: the
configuration with the best mean validation value is chosen even where another has the better test
score, its comparison with the reference row is the paired Student-t interval computed here, the
margin verdict follows it, and bad input is one line."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from scipy import stats

from helpers import CONF, entry_stage, fails_in_one_line
from lmforge.errors import DataError

SEEDS = (0, 1, 2)


def write_row(
    rows_dir: Path, name: str, test: list[float], val: float, seeds=SEEDS, task="sentiment"
) -> None:
    folder = rows_dir / name
    folder.mkdir(parents=True)
    run = {"task": task, "metrics": ["accuracy"], "family": "encoder", "model": "encoder", "adapt": name,
           "init": "pretrained (encoder)", "seeds": list(seeds), "test_per_seed": {"accuracy": test},
           "examples": {"test": 1000}, "truncated": {"test": 0}}  # fmt: skip
    metrics = {"test_accuracy": statistics.fmean(test), "val_accuracy": val, "train_seconds": 15.0,
               "test_accuracy_std": statistics.stdev(test) if len(test) > 1 else 0.0, "latency_ms": 1.0,
               "steps": 200.0, "best_step": 150.0, "baseline_majority_accuracy": 0.48,
               "params_trainable": 30_000, "params_total": 1_900_000}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(run))
    (folder / "metrics.json").write_text(json.dumps(metrics))


FULL = [0.76, 0.75, 0.78]
CHOSEN = [0.74, 0.745, 0.77]  # best on validation
TEST_FAVOURITE = [0.80, 0.81, 0.79]  # best on test, second on validation: never chosen


def grid(tmp_path: Path) -> None:
    rows = tmp_path / "grid"
    write_row(rows, "lora-qv-r8-lr0.001", [0.58, 0.57, 0.59], 0.59)
    write_row(rows, "lora-all-r32-lr0.01", CHOSEN, 0.771)
    write_row(rows, "lora-all-r8-lr0.03", TEST_FAVOURITE, 0.770)
    write_row(tmp_path / "reference", "full", FULL, 0.76)


def config(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            config_name="grid",
            overrides=["logger=none", f"grid.rows_dir={tmp_path / 'grid'}",
                       f"grid.reference_dirs=[{tmp_path / 'reference'}]", "grid.against=full",
                       "grid.chosen=lora-searched", f"grid.out_dir={tmp_path / 'out'}", *overrides],
        )  # fmt: skip


def test_validation_chooses_and_the_chosen_row_is_compared_paired_by_seed(tmp_path):
    grid(tmp_path)
    entry_stage("finetune_grid")(config(tmp_path))
    report = json.loads((tmp_path / "out/summary.json").read_text())
    assert report["chosen_from"] == "lora-all-r32-lr0.01"
    assert [entry["row"] for entry in report["grid"]] == [
        "lora-all-r32-lr0.01",
        "lora-all-r8-lr0.03",
        "lora-qv-r8-lr0.001",
    ]
    assert set(report["rows"]) == {"lora-searched", "full"}
    gaps = [a - b for a, b in zip(CHOSEN, FULL)]
    mean, sd = statistics.fmean(gaps), statistics.stdev(gaps)
    half = stats.t.ppf(0.975, len(gaps) - 1) * sd / math.sqrt(len(gaps))
    compared = report["comparisons"]["lora-searched-vs-full"]
    assert (compared["difference"], compared["low"], compared["high"]) == pytest.approx(
        (mean, mean - half, mean + half)
    )
    assert compared["seeds"] == 3 and compared["margin"] == pytest.approx(0.03)
    assert "within 3 points: not identified" in compared["verdict"]  # [-3.1, +0.7] crosses -3
    text = (tmp_path / "out/summary.md").read_text()
    assert "| 1 | lora-all-r32-lr0.01 (chosen) | 77.1 |" in text


def test_a_grid_of_mixed_seeds_or_a_missing_reference_is_one_line(tmp_path, capsys):
    grid(tmp_path)
    err = fails_in_one_line(capsys, entry_stage("finetune_grid"), config(tmp_path, "grid.against=qlora"))
    assert "grid.against: row 'qlora' is in none of" in err
    err = fails_in_one_line(capsys, entry_stage("finetune_grid"), config(tmp_path, "grid.margin=-1"))
    assert "margin of lora-searched vs full: got -1.0, expected a positive number of points" in err
    write_row(tmp_path / "grid", "lora-qv-r64-lr0.1", [0.5], 0.9, seeds=(0,))
    with pytest.raises(DataError, match="differ in task"):
        entry_stage("finetune_grid")(config(tmp_path))
    assert not (tmp_path / "out").exists()
