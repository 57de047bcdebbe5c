"""The `learning_curves` stage: a downstream score against the number of labelled training examples.

The sweep of conf/sweep/learning_curve.yaml fine-tunes rows of conf/row/ on fixed seeded subsets of
a task's training split (`finetune.train_examples`: the first n by the ranking that splits the task,
so each subset holds the smaller ones), one folder per run under {runs_dir}/<task>/, named by the
overrides that differ between jobs (`finetune.train_examples=100,row=encoder-pos`). Each run's metrics.json
also holds the classical baselines fitted on the same subset (TF-IDF + logistic regression, the
most-frequent tag), so the baseline gets its own curve at no cost.

Writes {out_dir}/learning_curves.md (a table per task: one line per starting point and the
baseline, a column per label budget, mean ± std over seeds of the task's first metric),
learning_curves.json and learning_curves.png (a panel per task, the number of examples on a log
axis, error bars of one standard deviation over seeds), which the stage logs to MLflow.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.errors import ConfigError, DataError
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult, read
from lmforge.structured import Group


@dataclass(frozen=True)
class CurvesConfig:
    runs_dir: str = "sweeps/learning_curve"  # a folder per run: <task>/<overrides>/reports/{run,metrics}.json
    out_dir: str = "reports/finetune"  # learning_curves.{md,json,png}

    def __post_init__(self) -> None:
        if not self.runs_dir or not self.out_dir:
            raise ConfigError("curves.runs_dir and curves.out_dir: expected folder paths, got an empty one")


curves_config = Group(CurvesConfig, "curves")


def overrides(name: str) -> dict[str, str]:
    """A sweep folder's name (Hydra's override_dirname, `kv_sep: "="`, `item_sep: ","`) as the overrides
    it ran with: `finetune.train_examples=100,row=encoder-pos` -> {"finetune.train_examples": "100",
    "row": "encoder-pos"}. The learning-rate grid's table reads its folders the same way."""
    return dict(item.split("=", 1) for item in name.split(",") if "=" in item)


@dataclass(frozen=True)
class Point:
    task: str
    line: str  # the row (its starting point), or "baseline: <name>"
    metric: str
    n_train: int  # training examples the run read
    scores: tuple[float, ...]  # per seed (one value for a baseline)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores)

    @property
    def std(self) -> float:
        return statistics.stdev(self.scores) if len(self.scores) > 1 else 0.0


def read_points(runs_dir: Path) -> list[Point]:
    """Every finished run's first test metric, and its baselines', keyed by task, line and n."""
    points: dict[tuple[str, str, int], Point] = {}
    for metrics_file in sorted(runs_dir.glob("*/*/reports/metrics.json")):
        folder = metrics_file.parent.parent
        row = overrides(folder.name).get("row")
        if row is None:
            continue  # Hydra's own multirun folder, or a run that names no row
        try:
            run = json.loads((metrics_file.parent / "run.json").read_text(encoding="utf-8"))
            metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise DataError(
                f"learning-curve run {folder}: unreadable run.json or metrics.json ({err})"
            ) from None
        task, metric, n = run["task"], run["metrics"][0], int(run["examples"]["train"])
        points[task, row, n] = Point(task, row, metric, n, tuple(run["test_per_seed"][metric]))
        prefix, suffix = "baseline_", f"_{metric}"
        for key, value in metrics.items():
            if key.startswith(prefix) and key.endswith(suffix):
                name = f"baseline: {key[len(prefix) : -len(suffix)]}"
                points.setdefault((task, name, n), Point(task, name, metric, n, (float(value),)))
    if not points:
        raise DataError(
            f"{runs_dir} holds no finished learning-curve runs; expected <task>/<overrides>/reports/metrics.json "
            "folders from `python pipelines/finetune.py --multirun sweep=learning_curve ...`"
        )
    return sorted(points.values(), key=lambda p: (p.task, p.line.startswith("baseline"), p.line, p.n_train))


def by_task(points: list[Point]) -> dict[str, dict[str, list[Point]]]:
    tasks: dict[str, dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        tasks[p.task][p.line].append(p)
    return {task: dict(lines) for task, lines in tasks.items()}


def render(points: list[Point]) -> str:
    parts = []
    for task, lines in by_task(points).items():
        sizes = sorted({p.n_train for ps in lines.values() for p in ps})
        metric = next(iter(lines.values()))[0].metric
        header = ["starting point"] + [f"{n:,}" for n in sizes] + ["seeds"]
        out = [f"**{task}**, test {metric} (%) by training examples:", ""]
        out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for line, ps in lines.items():
            at = {p.n_train: p for p in ps}
            cells = [line] + [_cell(at[n]) if n in at else "–" for n in sizes]
            cells.append(str(max(len(p.scores) for p in ps)) if not line.startswith("baseline") else "–")
            out.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(out))
    return "\n\n".join(parts) + "\n"


def _cell(p: Point) -> str:
    return f"{100 * p.mean:.1f} ± {100 * p.std:.1f}" if len(p.scores) > 1 else f"{100 * p.mean:.1f}"


def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = by_task(points)
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for ax, (task, lines) in zip(axes[0], tasks.items()):
        for line, ps in lines.items():
            baseline = line.startswith("baseline")
            ax.errorbar(
                [p.n_train for p in ps],
                [100 * p.mean for p in ps],
                yerr=None if baseline else [100 * p.std for p in ps],
                label=line,
                marker="o",
                capsize=3,
                linestyle="--" if baseline else "-",
            )
        ax.set_xscale("log")
        ax.set_xlabel("labelled training examples")
        ax.set_ylabel(f"test {next(iter(lines.values()))[0].metric} (%)")
        ax.set_title(task)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)  # atomic: a reader never sees half a figure


@dataclass(frozen=True, kw_only=True, eq=False)
class CurvesPlan(Plan):
    """The `learning_curves` stage's plan."""

    curves: CurvesConfig = read(curves_config)


def run(plan: CurvesPlan) -> StageResult:
    cfg = plan.curves
    points = read_points(Path(cfg.runs_dir))
    out = Path(cfg.out_dir)
    numbers: dict[str, Any] = {
        task: {
            line: {str(p.n_train): {"mean": p.mean, "std": p.std, "seeds": len(p.scores)} for p in ps}
            for line, ps in lines.items()
        }
        for task, lines in by_task(points).items()
    }
    write_json(out / "learning_curves.json", numbers)
    write_text(out / "learning_curves.md", render(points))
    plot(points, out / "learning_curves.png")
    flat = {f"{p.task}/{p.line.replace(': ', '_')}/n{p.n_train}": p.mean for p in points}
    files = [str(out / f"learning_curves.{ext}") for ext in ("md", "json", "png")]
    return StageResult(flat, files)
