"""The learning-curve table and plot: runs of the sweep read back by task, starting point and label
budget, the baselines fitted on each subset given their own line, and bad folders refused."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir

from helpers import CONF, entry_stage
from lmforge.errors import DataError


def _run(root, row, n, scores, baseline):
    folder = root / "pos" / f"finetune.train_examples={n},row={row}" / "reports"
    folder.mkdir(parents=True)
    run = {"task": "pos", "metrics": ["token_accuracy"], "examples": {"train": n, "val": 10, "test": 10}}
    run["test_per_seed"] = {"token_accuracy": scores}
    (folder / "run.json").write_text(json.dumps(run))
    metrics = {
        "test_token_accuracy": sum(scores) / len(scores),
        "baseline_most_frequent_tag_token_accuracy": baseline,
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))


def _config(tmp_path):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            config_name="learning_curves",
            overrides=[
                "logger=none",
                f"curves.runs_dir={tmp_path / 'runs'}",
                f"curves.out_dir={tmp_path / 'out'}",
            ],
        )


def test_curves_tabulate_each_starting_point_and_the_baseline_by_label_budget(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "encoder-pos", 100, [0.80, 0.84], 0.70)
    _run(runs, "encoder-pos", 1000, [0.90, 0.92], 0.85)
    _run(runs, "scratch-pos", 100, [0.60, 0.62], 0.70)
    (runs / "multirun" / "0").mkdir(parents=True)  # Hydra's own folder: no row, skipped
    result = entry_stage("learning_curves")(_config(tmp_path))
    table = (tmp_path / "out" / "learning_curves.md").read_text().splitlines()
    assert table[2:4] == ["| starting point | 100 | 1,000 | seeds |", "|---|---|---|---|"]
    assert table[4] == "| encoder-pos | 82.0 ± 2.8 | 91.0 ± 1.4 | 2 |"
    assert table[5] == "| scratch-pos | 61.0 ± 1.4 | – | 2 |"
    assert table[6] == "| baseline: most_frequent_tag | 70.0 | 85.0 | – |"
    numbers = json.loads((tmp_path / "out" / "learning_curves.json").read_text())
    assert numbers["pos"]["encoder-pos"]["1000"]["mean"] == pytest.approx(0.91)
    assert (tmp_path / "out" / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert result.metrics["pos/baseline_most_frequent_tag/n100"] == pytest.approx(0.70)


def test_no_finished_run_is_one_line(tmp_path):
    (tmp_path / "runs" / "multirun").mkdir(parents=True)
    with pytest.raises(DataError, match="holds no finished learning-curve runs"):
        entry_stage("learning_curves")(_config(tmp_path))
