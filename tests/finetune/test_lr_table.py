"""scripts/finetune_lr_table.py: the learning-rate grid's runs grouped by row, the best validation
value chosen (the smaller rate on a tie), and one line with exit 2 when there is nothing to read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lmforge.timings import write_timings

ROOT = Path(__file__).resolve().parents[2]


def _run(root: Path, name: str, val: float, steps: int, best: int) -> None:
    reports = root / name / "reports"
    reports.mkdir(parents=True)
    (reports / "run.json").write_text(json.dumps({"metrics": ["accuracy", "macro_f1"]}))
    metrics = {"val_accuracy": val, "steps": steps, "best_step": best}
    (reports / "metrics.json").write_text(json.dumps(metrics))
    write_timings(reports, {"train_seconds": 12.0})  # a run's clock sits apart from its metrics


def test_the_grid_table_marks_each_rows_best_rate(tmp_path):
    _run(tmp_path, "finetune.optim.lr=0.0003,row=a", 0.70, 900, 600)
    _run(tmp_path, "finetune.optim.lr=0.001,row=a", 0.75, 800, 500)
    _run(tmp_path, "finetune.optim.lr=0.003,row=a", 0.75, 700, 400)  # a tie: the smaller rate is chosen
    _run(tmp_path, "finetune.optim.lr=0.01,row=b", 0.60, 300, 100)
    (tmp_path / "multirun").mkdir()  # Hydra's own folder: no reports, skipped
    out = subprocess.run(
        [sys.executable, "scripts/finetune_lr_table.py", "--root", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[2:] == [
        "| `row=a` | 0.0003 | accuracy 70.0 | 900 (600) | 12 |",
        "| `row=a` | 0.001 **chosen** | accuracy 75.0 | 800 (500) | 12 |",
        "| `row=a` | 0.003 | accuracy 75.0 | 700 (400) | 12 |",
        "| `row=b` | 0.01 **chosen** | accuracy 60.0 | 300 (100) | 12 |",
    ]
    empty = subprocess.run(
        [sys.executable, "scripts/finetune_lr_table.py", "--root", str(tmp_path / "none")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert empty.returncode == 2 and empty.stderr.count("\n") == 1
