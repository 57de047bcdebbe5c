"""The `finetune_summary` stage: every fine-tuned row side by side.

Reads {rows_dir}/<row>/{run.json,metrics.json} (one folder per finetune run) and writes
{out_dir}/summary.json (row -> numbers, for `dvc metrics show` and MLflow) and {out_dir}/summary.md:
a row per task x model x init x adaptation with the test metrics (mean ± std over seeds), the
task's baselines on the same test examples, trainable parameters, training time and latency.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.errors import DataError
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult
from lmforge.structured import Group

TASK_ORDER = ("sentiment", "topic", "pos", "paraphrase", "qa")


@dataclass(frozen=True)
class SummaryConfig:
    rows_dir: str = "reports/finetune/rows"
    out_dir: str = "reports/finetune"


summary_config = Group(SummaryConfig, "summary")


def read_rows(rows_dir: Path) -> dict[str, dict[str, Any]]:
    rows = {}
    for folder in sorted(p for p in rows_dir.iterdir() if p.is_dir()) if rows_dir.is_dir() else []:
        try:
            run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
            metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise DataError(f"finetune row {folder}: unreadable run.json or metrics.json ({err})") from None
        rows[folder.name] = {"run": run, "metrics": metrics}
    if not rows:
        raise DataError(f"{rows_dir} holds no finetune rows; expected run.json + metrics.json folders")
    return rows


def _order(item: tuple[str, dict]) -> tuple:
    run = item[1]["run"]
    task = TASK_ORDER.index(run["task"]) if run["task"] in TASK_ORDER else len(TASK_ORDER)
    return task, run["task"], run["family"], run["init"], run["adapt"], item[0]


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _params(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e5 else f"{n / 1e3:.1f}k"


def _model(run: dict[str, Any]) -> str:
    """Our runs are named by family; an imported model by its name, with its family."""
    return run["model"] if run["model"] == run["family"] else f"{run['model']} ({run['family']})"


def render(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| task | model | init | adaptation | test metric (%) | baselines (same test examples) "
        "| trainable params | train s | latency ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, row in sorted(rows.items(), key=_order):
        run, m = row["run"], row["metrics"]
        scores = []
        for metric in run["metrics"]:
            text = f"{metric} {_pct(m[f'test_{metric}'])}"
            if len(run["seeds"]) > 1:
                text += f" ± {_pct(m[f'test_{metric}_std'])}"
            scores.append(text)
        first = run["metrics"][0]
        baselines = [
            f"{key[len('baseline_') : -len(first) - 1]} {_pct(value)}"
            for key, value in sorted(m.items())
            if key.startswith("baseline_") and key.endswith(f"_{first}")
        ]
        lines.append(
            f"| {run['task']} | {_model(run)} | {run['init'].split(' ')[0]} "
            f"| {run['adapt']} | {', '.join(scores)} | {', '.join(baselines)} "
            f"| {_params(m['params_trainable'])} of {_params(m['params_total'])} "
            f"| {m['train_seconds']:.0f} | {m['latency_ms']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def run(plan: Plan) -> StageResult:
    summary = plan.summary
    rows = read_rows(Path(summary.rows_dir))
    numbers = {name: row["metrics"] for name, row in rows.items()}
    out = Path(summary.out_dir)
    write_json(out / "summary.json", numbers)
    write_text(out / "summary.md", render(rows))
    flat = {
        f"{name}/{key}": float(value) for name, values in numbers.items() for key, value in values.items()
    }
    return StageResult(flat, [str(out / "summary.json"), str(out / "summary.md")])
