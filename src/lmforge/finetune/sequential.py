"""A margin claim decided by a sequential design (pipelines/finetune_sequential.py).

"Row a is at most `margin` points below row b" (LoRA against full fine-tuning) is a non-inferiority
claim: it is shown when the interval of a - b lies wholly above -margin and refuted when it lies wholly
below. When a fixed number of seeds leaves the interval across the margin, more seeds decide it; but
looking after every block and stopping when a look decides would, at a fixed level, make a wrong
decision likelier with every look. So the design is declared before the blocks run:

- seeds come in blocks of `block` (each seed runs both rows), at most `looks` blocks;
- look k compares the first k * block seeds both rows ran, paired by seed (`lmforge.stats.paired`),
  with a two-sided Student-t interval at level 1 - alpha / looks (Bonferroni over the planned looks:
  the chance that any look's interval misses the true difference stays at most alpha, whatever the
  looks' correlation);
- the design stops at the first look that decides; if the last planned look does not, the claim is
  "not identified" at the design's maximum.

Seeds past the deciding look are shown but never judged. While no look has decided and fewer than
`looks` blocks ran, the report names the seeds of the next block, which the experiments pipeline adds
as a stage instance (pipelines/experiments/stages.yaml): a block runs only when the previous look did
not decide.

Writes {out_dir}/summary.json (in the fine-tuning summaries' schema, "rows" and "comparisons", so the
findings read it as they read those, plus "design" and "looks") and {out_dir}/summary.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.errors import ConfigError, DataError
from lmforge.finetune.summary import Comparison, compare, merge_seeds, read_rows
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult, read
from lmforge.stats import Difference, within
from lmforge.structured import Group, rooted


@dataclass(frozen=True)
class SequentialConfig:
    a: str  # the row the claim is about (a folder name under rows_dirs)
    b: str  # the row it is compared with, on the same task
    # folders of row folders: a row's runs in every one of them are pooled (its first block in one
    # stage's rows, the blocks the design added in another's)
    rows_dirs: list[str]
    claim: str = ""  # what the comparison tests, in words
    out_dir: str = rooted("reports/sequential", "${paths.reports}/sequential")
    margin: float = 3.0  # points: a - b > -margin is the claim
    block: int = 8  # seeds per look
    looks: int = 4  # the most looks (blocks) the design takes: block * looks seeds at most
    alpha: float = 0.05  # the chance, over every look together, that a look's interval misses

    def __post_init__(self) -> None:
        if not self.a or not self.b or self.a == self.b:
            raise ConfigError(
                f"sequential.a, sequential.b: got {self.a!r}, {self.b!r}; expected two row names"
            )
        if not self.rows_dirs:
            raise ConfigError("sequential.rows_dirs: got [], expected at least one folder of rows")
        if not self.margin > 0:
            raise ConfigError(f"sequential.margin: got {self.margin}, expected a positive number of points")
        if self.block < 2:
            raise ConfigError(f"sequential.block: got {self.block}, expected at least 2 seeds per look")
        if self.looks < 1:
            raise ConfigError(f"sequential.looks: got {self.looks}, expected at least 1")
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"sequential.alpha: got {self.alpha}, expected a value in (0, 1)")

    @property
    def level(self) -> float:
        """Each look's two-sided level: 1 - alpha / looks."""
        return 1.0 - self.alpha / self.looks


sequential_config = Group(SequentialConfig, "sequential")


def pooled(names: tuple[str, str], rows_dirs: list[str]) -> list[dict[str, Any]]:
    """Each named row's runs in every folder of `rows_dirs`, merged into one row (its seeds pooled)."""
    found: dict[str, list[tuple[Path, dict[str, Any]]]] = {name: [] for name in names}
    for folder in map(Path, rows_dirs):
        rows = read_rows(folder) if folder.is_dir() else {}
        for name in names:
            if name in rows:
                found[name].append((folder / name, rows[name]))
    merged = []
    for name, runs in found.items():
        if not runs:
            raise DataError(f"sequential: row {name!r} is in none of {rows_dirs}; expected its folder in one")
        merged.append(runs[0][1] if len(runs) == 1 else merge_seeds(runs[0][0], [row for _, row in runs]))
    return merged


def first_seeds(row: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """`row` restricted to `seeds` (its per-seed test scores; the rest as it is)."""
    run = row["run"]
    index = [run["seeds"].index(seed) for seed in seeds]
    per_seed = {metric: [values[i] for i in index] for metric, values in run["test_per_seed"].items()}
    return {"run": {**run, "seeds": list(seeds), "test_per_seed": per_seed}, "metrics": row["metrics"]}


def decision(d: Difference, margin: float) -> tuple[str, bool]:
    """The look's verdict on the margin claim and whether it decides: its interval lies wholly on
    one side of -margin (shown or refuted)."""
    decides = (
        d.low is not None and d.high is not None and bool(d.low >= -margin / 100 or d.high < -margin / 100)
    )
    return within(d, margin / 100, f"{margin:g} points"), decides


def looks(
    cfg: SequentialConfig, a: dict[str, Any], b: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[int]]:
    """Every look the seeds both rows ran allow, up to the first that decides, each with its interval
    and verdict; and the seeds they share, in order."""
    shared = sorted(set(a["run"]["seeds"]) & set(b["run"]["seeds"]))
    comparison = Comparison(cfg.a, cfg.b, cfg.claim, cfg.margin)
    taken = []
    for k in range(1, min(len(shared) // cfg.block, cfg.looks) + 1):
        seeds = shared[: k * cfg.block]
        rows = {cfg.a: first_seeds(a, seeds), cfg.b: first_seeds(b, seeds)}
        metric, d, mean_a, mean_b = compare(rows, comparison, cfg.level)
        text, decides = decision(d, cfg.margin)
        taken.append(
            {
                "look": k,
                "seeds": len(seeds),
                "metric": metric,
                "a": mean_a,
                "b": mean_b,
                "difference": d.mean,
                "low": d.low,
                "high": d.high,
                "verdict": text,
                "decides": decides,
            }
        )
        if decides:
            break
    return taken, shared


def next_block(cfg: SequentialConfig, taken: list[dict[str, Any]], shared: list[int]) -> list[int]:
    """The seeds the next look still needs, after the largest seed run: none once a look decided or
    the last look was taken."""
    if (taken and taken[-1]["decides"]) or len(taken) >= cfg.looks:
        return []
    start = max(shared, default=-1) + 1
    return list(range(start, start + (len(taken) + 1) * cfg.block - len(shared)))


def _pts(value: float | None) -> str:
    return "" if value is None else f"{100 * value:+.1f}"


def render(cfg: SequentialConfig, taken: list[dict[str, Any]], shared: list[int], upcoming: list[int]) -> str:
    level = f"{100 * cfg.level:.2f}".rstrip("0").rstrip(".")
    lines = [
        f"# {cfg.claim or cfg.a + ' against ' + cfg.b}: a sequential design",
        "",
        f"Claim: {cfg.a} is at most {cfg.margin:g} points below {cfg.b}. The design, declared in its config "
        f"before the blocks it adds ran: blocks of {cfg.block} seeds, each seed running both rows, at most {cfg.looks} looks "
        f"({cfg.block * cfg.looks} seeds); look k pairs the first k x {cfg.block} seeds with a {level}% "
        f"Student-t interval (1 - {cfg.alpha:g} / {cfg.looks}, Bonferroni over the looks); the design "
        f"stops at the first look whose interval lies wholly above -{cfg.margin:g} points (shown) or wholly "
        "below (refuted) (lmforge.finetune.sequential).",
        "",
        f"| look | seeds | {cfg.a} (%) | {cfg.b} (%) | a - b (points) | {level}% interval | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in taken:
        span = "" if t["low"] is None else f"[{_pts(t['low'])}, {_pts(t['high'])}]"
        lines.append(
            f"| {t['look']} | {t['seeds']} | {100 * t['a']:.1f} | {100 * t['b']:.1f} | {_pts(t['difference'])} "
            f"| {span} | {t['verdict']} |"
        )
    lines.append("")
    judged = taken[-1]["seeds"] if taken else 0
    if taken and taken[-1]["decides"]:
        lines.append(f"Decided at look {taken[-1]['look']}: {taken[-1]['verdict']}.")
    elif len(taken) >= cfg.looks:
        lines.append(f"Not identified at the design's maximum of {cfg.block * cfg.looks} seeds.")
    else:
        lines.append(
            f"Not decided after {len(taken)} of {cfg.looks} looks: the next block runs seeds "
            f"{', '.join(map(str, upcoming))}."
        )
    if len(shared) > judged:
        lines.append(f"Seeds past the last look ({len(shared) - judged}) are not judged.")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True, eq=False)
class SequentialPlan(Plan):
    """The `finetune_sequential` stage's plan."""

    sequential: SequentialConfig = read(sequential_config)


def run(plan: SequentialPlan) -> StageResult:
    cfg: SequentialConfig = plan.sequential
    a, b = pooled((cfg.a, cfg.b), cfg.rows_dirs)
    taken, shared = looks(cfg, a, b)
    if not taken:
        raise DataError(
            f"sequential: {cfg.a} and {cfg.b} share {len(shared)} seeds; expected a block of at least "
            f"{cfg.block} for the first look"
        )
    upcoming = next_block(cfg, taken, shared)
    last = taken[-1]
    key = f"{cfg.a}-vs-{cfg.b}"
    comparison = {
        "difference": last["difference"],
        **({"low": last["low"], "high": last["high"]} if last["low"] is not None else {}),
        "margin": cfg.margin / 100,
        "seeds": last["seeds"],
        "level": cfg.level,
        "look": last["look"],
        "looks": cfg.looks,
        "decided": last["decides"],
    }
    design = {
        "block": cfg.block,
        "looks": cfg.looks,
        "alpha": cfg.alpha,
        "level": cfg.level,
        "margin": cfg.margin / 100,
    }
    out = Path(cfg.out_dir)
    write_json(
        out / "summary.json",
        {
            "rows": {cfg.a: a["metrics"], cfg.b: b["metrics"]},
            "comparisons": {key: comparison},
            "design": design,
            "looks": taken,
            "next_seeds": upcoming,
        },
    )
    write_text(out / "summary.md", render(cfg, taken, shared, upcoming))
    metrics = {
        f"{key}/{name}": float(value)
        for name, value in comparison.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    return StageResult(metrics, [str(out / "summary.json"), str(out / "summary.md")])
