"""A fine-tuning grid decided on validation (pipelines/finetune_grid.py): the configuration a claim is
tested with is the one the validation split chose, never the one the test split favours.

The grid's jobs ran as fine-tuning rows under `rows_dir` (a Hydra multirun of the finetune stage,
one row folder per configuration, every configuration with the same seeds). Each is ranked by its
validation value of the task's first metric, the mean over its seeds; the best becomes the row
`chosen` and is compared with `against` (a row of one of `reference_dirs`, the same task) on the test
split, paired by seed (`lmforge.finetune.summary.compare`), and judged against `margin` when the claim
has one ("LoRA is within 3 points of full fine-tuning").

Writes {out_dir}/summary.json in the fine-tuning summaries' schema ("rows": the chosen row and the
one it is compared with; "comparisons": "<chosen>-vs-<against>"), so the findings read it as they
read those, plus "grid" (each configuration's row, validation value, steps and best step, best first) and
"chosen_from" (the configuration behind `chosen`); and {out_dir}/summary.md: the ranked grid, then
the two rows and their comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmforge.errors import ConfigError, DataError
from lmforge.finetune.summary import (
    Comparison,
    SummaryConfig,
    compare,
    read_rows,
    referenced,
    render,
    render_comparisons,
    verdict,
)
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult, read
from lmforge.structured import Group, rooted


@dataclass(frozen=True)
class GridConfig:
    rows_dir: str  # the grid's row folders, one per configuration
    against: str  # the row the chosen configuration is compared with (under reference_dirs)
    chosen: str  # the name the chosen configuration's row takes in the comparison
    reference_dirs: list[str] = field(default_factory=list)
    claim: str = ""
    margin: float | None = None  # points: a non-inferiority claim ("chosen - against > -margin")
    level: float = 0.95  # of the comparison's two-sided Student-t interval
    out_dir: str = rooted("reports/grid", "${paths.reports}/grid")

    def __post_init__(self) -> None:
        if not self.chosen or not self.against or self.chosen == self.against:
            raise ConfigError(
                f"grid.chosen, grid.against: got {self.chosen!r}, {self.against!r}; expected two row names"
            )
        if not self.reference_dirs:
            raise ConfigError("grid.reference_dirs: got [], expected the folder that holds grid.against")
        if not 0.0 < self.level < 1.0:
            raise ConfigError(f"grid.level: got {self.level}, expected a value in (0, 1)")
        Comparison(self.chosen, self.against, self.claim, self.margin)  # the margin's own check


grid_config = Group(GridConfig, "grid")


def ranked(rows: dict[str, dict[str, Any]]) -> list[tuple[str, float]]:
    """Each configuration with its validation value of the task's first metric (mean over its seeds),
    best first; ties keep the folders' order. Refuses a grid whose rows differ in task or seeds."""
    tasks = {row["run"]["task"] for row in rows.values()}
    seeds = {tuple(row["run"]["seeds"]) for row in rows.values()}
    if len(tasks) > 1 or len(seeds) > 1:
        raise DataError(
            f"grid: its rows differ in task ({sorted(tasks)}) or seeds ({sorted(seeds)}); expected one "
            "task and the same seeds for every configuration"
        )
    values = []
    for name, row in rows.items():
        key = f"val_{row['run']['metrics'][0]}"
        if key not in row["metrics"]:
            raise DataError(f"grid: row {name} has no {key} in its metrics.json; expected a finished row")
        values.append((name, float(row["metrics"][key])))
    return sorted(values, key=lambda item: -item[1])


def render_grid(order: list[tuple[str, float]], rows: dict[str, dict[str, Any]]) -> str:
    metric = rows[order[0][0]]["run"]["metrics"][0]
    lines = [
        f"| rank | row | validation {metric} (%, mean over seeds) | steps (best) |",
        "|---|---|---|---|",
    ]
    for rank, (name, value) in enumerate(order, 1):
        m = rows[name]["metrics"]
        mark = " (chosen)" if rank == 1 else ""
        lines.append(
            f"| {rank} | {name}{mark} | {100 * value:.1f} | {m['steps']:.0f} ({m['best_step']:.0f}) |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True, eq=False)
class GridPlan(Plan):
    """The `finetune_grid` stage's plan."""

    grid: GridConfig = read(grid_config)


def run(plan: GridPlan) -> StageResult:
    cfg: GridConfig = plan.grid
    grid = read_rows(Path(cfg.rows_dir))
    order = ranked(grid)
    best = order[0][0]
    comparison = Comparison(cfg.chosen, cfg.against, cfg.claim, cfg.margin)
    found = referenced(SummaryConfig(reference_dirs=cfg.reference_dirs, comparisons=[comparison]), {})
    if cfg.against not in found:
        raise DataError(f"grid.against: row {cfg.against!r} is in none of {cfg.reference_dirs}")
    rows = {cfg.chosen: grid[best], cfg.against: found[cfg.against]}
    metric, d, mean_a, mean_b = compare(rows, comparison, cfg.level)
    key = f"{cfg.chosen}-vs-{cfg.against}"
    difference = {
        "difference": d.mean,
        **({"low": d.low, "high": d.high} if d.low is not None else {}),
        **({"margin": cfg.margin / 100} if cfg.margin is not None else {}),
        "seeds": d.n,
        "verdict": verdict(comparison, d),
    }
    ranking = [
        {"row": name, "validation": value, **{k: grid[name]["metrics"][k] for k in ("steps", "best_step")}}
        for name, value in order
    ]
    out = Path(cfg.out_dir)
    write_json(
        out / "summary.json",
        {
            "rows": {name: row["metrics"] for name, row in rows.items()},
            "comparisons": {key: difference},
            "grid": ranking,
            "chosen_from": best,
        },
    )
    text = (
        f"# {cfg.claim or key}\n\n"
        f"The grid ({len(order)} configurations, seeds {grid[best]['run']['seeds']}), ranked by the "
        f"validation {metric} the choice reads (test scores are not looked at):\n\n"
        + render_grid(order, grid)
        + f"\nThe chosen configuration, {best}, as row {cfg.chosen}, beside {cfg.against}:\n\n"
        + render(rows)
        + f"\nTheir difference on the test split, paired by seed, with its {100 * cfg.level:.0f}% "
        "Student-t interval:\n\n" + render_comparisons([(comparison, (metric, d, mean_a, mean_b))], cfg.level)
    )
    write_text(out / "summary.md", text)
    metrics = {f"{key}/difference": float(d.mean), f"{cfg.chosen}/validation": order[0][1]}
    return StageResult(metrics, [str(out / "summary.json"), str(out / "summary.md")])
