"""The `finetune_summary` stage: every fine-tuned row side by side.

Reads {rows_dir}/<row>/{run.json,metrics.json} (one folder per finetune run, named by the row; or,
for a row whose seeds ran as separate runs, one `<row>/<part>/` folder per run, merged into the row),
and from each folder of `reference_dirs` (another stage's rows) the rows a comparison names, and
writes {out_dir}/summary.json ({"rows": row -> numbers, "comparisons": "<a>-vs-<b>" -> difference},
for `dvc metrics show` and MLflow) and {out_dir}/summary.md:
- a line per row, keyed by the row's name (so a variant never reads as a duplicate of a default row):
  its seeds, steps (and the step of its best validation), the test metrics (mean ± std over seeds),
  the task's baselines on the same test examples, the share of test inputs cut to the row's input
  length (and whether head or head and tail were kept), trainable parameters (a row's training time
  and latency are in its timings file, `lmforge.timings`: a summary holds only what its rows decide);
- a line per comparison of `summary.comparisons` (the claims the rows exist to test: pretrained vs
  scratch, LoRA vs full, ours vs MiniLM): the difference of the task's first metric, paired by seed,
  with its 95% interval and the verdict that follows from it (`lmforge.stats.paired`); a claim with a
  `margin` ("within 3 points") is judged against -margin instead (`lmforge.stats.within`).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmforge.errors import ConfigError, DataError
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult, read
from lmforge.stats import Difference, paired, within
from lmforge.structured import Group

TASK_ORDER = ("sentiment", "topic", "pos", "ner", "paraphrase", "qa")


@dataclass(frozen=True)
class Comparison:
    a: str  # a row's name (its folder under rows_dir)
    b: str  # the row it is compared with, on the same task
    claim: str = ""  # what the difference tests, e.g. "pretraining helps"
    # a non-inferiority claim ("a is at most `margin` points below b": LoRA against full fine-tuning),
    # judged by the interval against -margin (lmforge.stats.within); None: a difference claim
    margin: float | None = None

    def __post_init__(self) -> None:
        if self.margin is not None and not self.margin > 0:
            raise ConfigError(
                f"summary.comparisons: margin of {self.a} vs {self.b}: got {self.margin}, expected a "
                "positive number of points"
            )


@dataclass(frozen=True)
class SummaryConfig:
    rows_dir: str = "reports/finetune/rows"
    # other stages' row folders: a comparison may name their rows (MiniLM's rows, in the experiments
    # pipeline, against our encoder's default rows); those it names are tabled too
    reference_dirs: list[str] = field(default_factory=list)
    out_dir: str = "reports/finetune"
    comparisons: list[Comparison] = field(default_factory=list)
    level: float = 0.95  # of each difference's two-sided Student-t interval

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ConfigError(f"summary.level: got {self.level}, expected a value in (0, 1)")


summary_config = Group(SummaryConfig, "summary")


def read_rows(rows_dir: Path) -> dict[str, dict[str, Any]]:
    rows = {}
    for folder in sorted(p for p in rows_dir.iterdir() if p.is_dir()) if rows_dir.is_dir() else []:
        parts = sorted(p for p in folder.iterdir() if p.is_dir() and (p / "run.json").exists())
        if parts and (folder / "run.json").exists():
            raise DataError(
                f"finetune row {folder}: holds a run (run.json) and runs of single seeds "
                f"({', '.join(p.name for p in parts)}); expected one or the other (a stale run left behind?)"
            )
        rows[folder.name] = merge_seeds(folder, [_read_row(p) for p in parts]) if parts else _read_row(folder)
    if not rows:
        raise DataError(f"{rows_dir} holds no finetune rows; expected run.json + metrics.json folders")
    return rows


def _read_row(folder: Path) -> dict[str, Any]:
    try:
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"finetune row {folder}: unreadable run.json or metrics.json ({err})") from None
    return {"run": run, "metrics": metrics}


PER_SEED = ("seeds", "test_per_seed")  # what differs between two runs of one row with other seeds


def merge_seeds(folder: Path, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from runs of it with different seeds (a stage per seed, so a long row can be run a
    seed at a time): the numbers the finetune stage would have written had it run all the seeds at
    once. Test metrics: mean and sample std over every seed; validation score, steps and best step:
    the mean over every seed; baselines and parameters: those of the run with the first seed, as the
    stage reports its first seed's."""
    parts = sorted(parts, key=lambda part: min(part["run"]["seeds"]))
    runs, numbers = [part["run"] for part in parts], [part["metrics"] for part in parts]
    same = {key: value for key, value in runs[0].items() if key not in PER_SEED}
    for run in runs[1:]:
        differ = sorted(
            k for k in same.keys() | run.keys() if k not in PER_SEED and run.get(k) != same.get(k)
        )
        if differ:
            raise DataError(
                f"finetune row {folder}: its runs differ in {', '.join(differ)}; expected runs of one "
                "row that differ only in their seeds"
            )
    seeds = [seed for run in runs for seed in run["seeds"]]
    if len(set(seeds)) != len(seeds):
        raise DataError(f"finetune row {folder}: its runs repeat seeds ({seeds}); expected each seed once")
    for key in (k for k in numbers[0] if k.startswith("baseline_")):
        if any(m[key] != numbers[0][key] for m in numbers):
            raise DataError(
                f"finetune row {folder}: {key} differs between its runs; expected the same test examples"
            )
    test = {name: [value for run in runs for value in run["test_per_seed"][name]] for name in same["metrics"]}
    weights = [len(run["seeds"]) for run in runs]
    first = same["metrics"][0]
    metrics = dict(numbers[0])
    for name, values in test.items():
        metrics[f"test_{name}"] = statistics.fmean(values)
        metrics[f"test_{name}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
    metrics["test/score"] = metrics[f"test_{first}"]
    for key in (f"val_{first}", "steps", "best_step"):
        metrics[key] = statistics.fmean([m[key] for m in numbers], weights=weights)
    return {"run": {**same, "seeds": seeds, "test_per_seed": test}, "metrics": metrics}


def referenced(summary: SummaryConfig, rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rows of `summary.reference_dirs` that a comparison names and `rows` lacks, first folder first."""
    wanted = {name for c in summary.comparisons for name in (c.a, c.b)} - set(rows)
    found: dict[str, dict[str, Any]] = {}
    for folder in summary.reference_dirs:
        for name, row in read_rows(Path(folder)).items():
            if name in wanted and name not in found:
                found[name] = row
    return found


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


def _seeds(run: dict[str, Any]) -> str:
    """How many seeds, and which: `1 (0)`, `3 (0, 1, 2)`."""
    seeds = run["seeds"]
    return f"{len(seeds)} ({', '.join(str(seed) for seed in seeds)})"


def _cut(run: dict[str, Any]) -> str:
    """The share of test inputs longer than the row's max_len, and how they were cut."""
    share = run["truncated"]["test"] / max(run["examples"]["test"], 1)
    return f"{100 * share:.0f}%" + (f" ({run.get('truncation', 'head')})" if share else "")


def render(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| row | task | model | init | adaptation | seeds | steps (best) | test metric (%) "
        "| baselines (same test examples) | test inputs cut | trainable params |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in sorted(rows.items(), key=_order):
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
            f"| {name} | {run['task']} | {_model(run)} | {run['init'].split(' ')[0]} "
            f"| {run['adapt']} | {_seeds(run)} | {m['steps']:.0f} ({m['best_step']:.0f}) "
            f"| {', '.join(scores)} | {', '.join(baselines)} | {_cut(run)} "
            f"| {_params(m['params_trainable'])} of {_params(m['params_total'])} |"
        )
    return "\n".join(lines) + "\n"


def compare(
    rows: dict[str, dict[str, Any]], c: Comparison, level: float
) -> tuple[str, Difference, float, float]:
    """The task's first metric of row a minus row b, paired by seed: (metric, difference, and each
    row's mean over the seeds both ran, the numbers the difference is made of)."""
    for name in (c.a, c.b):
        if name not in rows:
            raise DataError(
                f"summary.comparisons: row {name!r} is not under the rows folder nor named in summary.reference_dirs; expected one of {sorted(rows)}"
            )
    run_a, run_b = rows[c.a]["run"], rows[c.b]["run"]
    if run_a["task"] != run_b["task"]:
        raise DataError(
            f"summary.comparisons: {c.a} ({run_a['task']}) and {c.b} ({run_b['task']}) are different "
            "tasks; expected two rows of one task"
        )
    metric = run_a["metrics"][0]
    a, b = (dict(zip(r["seeds"], r["test_per_seed"][metric])) for r in (run_a, run_b))
    shared = sorted(set(a) & set(b))
    means = [
        sum(scores[seed] for seed in shared) / len(shared) if shared else float("nan") for scores in (a, b)
    ]
    return metric, paired(a, b, (c.a, c.b), level), means[0], means[1]


def _points(value: float | None) -> str:
    return "" if value is None else f"{100 * value:+.1f}"


def verdict(c: Comparison, d: Difference) -> str:
    """The difference's verdict, and for a claim with a margin the verdict on the claim itself."""
    if c.margin is None or d.low is None:
        return d.verdict
    return f"{d.verdict}; {within(d, c.margin / 100, f'{c.margin:g} points')}"


def render_comparisons(
    compared: list[tuple[Comparison, tuple[str, Difference, float, float]]], level: float
) -> str:
    lines = [
        f"| claim | a | b | metric | a (%, shared seeds) | b (%, shared seeds) | a - b (points) | {100 * level:.0f}% interval "
        "| seeds | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c, (metric, d, a, b) in compared:
        span = "" if d.low is None else f"[{_points(d.low)}, {_points(d.high)}]"
        lines.append(
            f"| {c.claim} | {c.a} | {c.b} | {metric} | {_pct(a)} | {_pct(b)} | {_points(d.mean)} "
            f"| {span} | {d.n} | {verdict(c, d)} |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True, eq=False)
class SummaryPlan(Plan):
    """The `finetune_summary` stage's plan."""

    summary: SummaryConfig = read(summary_config)


def run(plan: SummaryPlan) -> StageResult:
    summary = plan.summary
    rows = read_rows(Path(summary.rows_dir))
    rows.update(referenced(summary, rows))
    numbers: dict[str, dict[str, Any]] = {name: row["metrics"] for name, row in rows.items()}
    differences: dict[str, dict[str, Any]] = {}
    text = render(rows)
    if summary.comparisons:
        compared = [(c, compare(rows, c, summary.level)) for c in summary.comparisons]
        text += (
            f"\nCompared rows: the difference of the task's first metric, paired by seed, with its "
            f'{100 * summary.level:.0f}% Student-t interval; "not distinguishable" when the interval '
            "covers zero. A claim that a is within a margin of b is shown when the whole interval lies "
            "above minus the margin, refuted when it lies below, and not identified when it crosses it."
            "\n\n" + render_comparisons(compared, summary.level)
        )
        for c, (_, d, _, _) in compared:
            differences[f"{c.a}-vs-{c.b}"] = {
                "difference": d.mean,
                **({"low": d.low, "high": d.high} if d.low is not None else {}),
                **({"margin": c.margin / 100} if c.margin is not None else {}),
                "seeds": d.n,
            }
    out = Path(summary.out_dir)
    write_json(out / "summary.json", {"rows": numbers, "comparisons": differences})
    write_text(out / "summary.md", text)
    flat = {
        f"{name}/{key}": float(value)
        for group in (numbers, differences)
        for name, values in group.items()
        for key, value in values.items()
    }
    return StageResult(flat, [str(out / "summary.json"), str(out / "summary.md")])
