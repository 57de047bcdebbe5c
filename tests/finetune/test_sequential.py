"""The sequential design (lmforge.finetune.sequential) on rows written by hand: each look's interval
against a Student-t interval computed here at the Bonferroni level, the stop at the first deciding
look, the seeds of the next block, rows pooled from two folders, and bad input in one line."""

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


def write_row(rows_dir: Path, name: str, scores: dict[int, float], part: str | None = None) -> None:
    folder = rows_dir / name / part if part else rows_dir / name
    folder.mkdir(parents=True)
    run = {"task": "sentiment", "metrics": ["accuracy"], "family": "encoder", "adapt": name,
           "seeds": list(scores), "test_per_seed": {"accuracy": list(scores.values())}}  # fmt: skip
    metrics = {"test_accuracy": statistics.fmean(scores.values()), "val_accuracy": 0.8, "train_seconds": 1.0,
               "steps": 90.0, "best_step": 80.0, "baseline_majority_accuracy": 0.5,
               "params_trainable": 2, "params_total": 100}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(run))
    (folder / "metrics.json").write_text(json.dumps(metrics))


def config(tmp_path: Path, *overrides: str):
    dirs = f"sequential.rows_dirs=[{tmp_path / 'first'},{tmp_path / 'blocks'}]"
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            config_name="sequential",
            overrides=["logger=none", dirs, f"sequential.out_dir={tmp_path / 'out'}", *overrides],
        )


def reference(differences: list[float], level: float) -> tuple[float, float, float]:
    """mean(d) -+ t_{n-1, (1+level)/2} sd(d) / sqrt(n), in points."""
    n, mean, sd = len(differences), statistics.fmean(differences), statistics.stdev(differences)
    half = stats.t.ppf((1 + level) / 2, n - 1) * sd / math.sqrt(n)
    return 100 * mean, 100 * (mean - half), 100 * (mean + half)


# LoRA minus full, per seed: the first block's spread is wide, the second's narrow
GAPS = [0.01, -0.023, -0.009, -0.054, -0.014, -0.026, -0.024, -0.007]
NARROW = [-0.017, -0.019, -0.018, -0.02, -0.016, -0.018, -0.019, -0.017]


def two_blocks(tmp_path: Path, later: list[float]) -> None:
    full = {seed: 0.8 + 0.001 * seed for seed in range(16)}
    gaps = dict(enumerate(GAPS + later))
    write_row(tmp_path / "first", "lora", {s: full[s] + gaps[s] for s in range(8)})
    write_row(tmp_path / "first", "full", {s: full[s] for s in range(8)})
    write_row(tmp_path / "blocks", "lora", {s: full[s] + gaps[s] for s in range(8, 16)}, "from-seed8")
    write_row(tmp_path / "blocks", "full", {s: full[s] for s in range(8, 16)}, "from-seed8")


def test_each_look_is_the_paired_interval_at_the_bonferroni_level_and_the_design_stops(tmp_path):
    two_blocks(tmp_path, NARROW)
    entry_stage("finetune_sequential")(config(tmp_path, "sequential.a=lora", "sequential.b=full"))
    report = json.loads((tmp_path / "out/summary.json").read_text())
    level = 1 - 0.05 / 4
    assert report["design"]["level"] == pytest.approx(level)
    first, second = report["looks"]
    for look, gaps in ((first, GAPS), (second, GAPS + NARROW)):
        measured = (100 * look["difference"], 100 * look["low"], 100 * look["high"])
        assert measured == pytest.approx(reference(gaps, level))
    assert not first["decides"] and first["verdict"].startswith("within 3 points: not identified")
    assert second["decides"] and second["verdict"] == "within 3 points: shown"
    assert report["next_seeds"] == []
    compared = report["comparisons"]["lora-vs-full"]
    assert compared["seeds"] == 16 and compared["look"] == 2 and compared["decided"]
    assert set(report["rows"]) == {"lora", "full"}
    assert "Decided at look 2: within 3 points: shown." in (tmp_path / "out/summary.md").read_text()


def test_an_undecided_look_names_the_next_block_and_later_seeds_are_not_judged(tmp_path):
    two_blocks(tmp_path, [-0.03, 0.02, -0.06, 0.01, -0.05, 0.0, -0.04, 0.015])  # still wide
    entry_stage("finetune_sequential")(config(tmp_path, "sequential.a=lora", "sequential.b=full"))
    report = json.loads((tmp_path / "out/summary.json").read_text())
    assert [look["decides"] for look in report["looks"]] == [False, False]
    assert report["next_seeds"] == list(range(16, 24))
    # a block of 16 at one look: the first look needs all 16 seeds and decides nothing yet
    entry_stage("finetune_sequential")(
        config(tmp_path, "sequential.a=lora", "sequential.b=full", "sequential.block=12")
    )
    report = json.loads((tmp_path / "out/summary.json").read_text())
    assert len(report["looks"]) == 1 and report["looks"][0]["seeds"] == 12
    assert report["next_seeds"] == list(range(16, 24))  # 24 seeds for look 2: 8 more
    assert "Seeds past the last look (4) are not judged." in (tmp_path / "out/summary.md").read_text()


def test_too_few_seeds_or_a_missing_row_is_one_line(tmp_path, capsys):
    two_blocks(tmp_path, NARROW)
    with pytest.raises(DataError, match="share 16 seeds; expected a block of at least 20"):
        entry_stage("finetune_sequential")(
            config(tmp_path, "sequential.a=lora", "sequential.b=full", "sequential.block=20")
        )
    err = fails_in_one_line(
        capsys,
        entry_stage("finetune_sequential"),
        config(tmp_path, "sequential.a=qlora", "sequential.b=full"),
    )
    assert "row 'qlora' is in none of" in err
    err = fails_in_one_line(
        capsys,
        entry_stage("finetune_sequential"),
        config(tmp_path, "sequential.a=lora", "sequential.b=full", "sequential.alpha=2"),
    )
    assert "sequential.alpha: got 2.0, expected a value in (0, 1)" in err
    assert not (tmp_path / "out").exists()
