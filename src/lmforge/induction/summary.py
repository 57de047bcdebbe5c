"""The induction study's table and figure (pipelines/induction_summary.py, DVC `induction_summary`).

Every run folder under `induction.runs_dir` -> {out_dir}/summary.{md,json} and induction.png: per share
of repeated windows, the final best-head induction score with its 95% Student-t interval over seeds,
the same for the shifted score (a head on the key s positions after the textbook one, at two copy
lengths: `lmforge.interpret.induction.shifted_induction_scores`) with each seed's shift, whether the
head score's interval lies above the threshold (a head forms), below it (none forms) or across it,
and the step at which each seed's score first passed it. The head score is the shifted one, which
includes the textbook key as shift 0; curves written before the probe had it use the textbook score,
and the table says which.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Any

from lmforge.errors import DataError
from lmforge.figures import plt, save_figure
from lmforge.induction.config import TASKS, InductionConfig, induction_config
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult, read
from lmforge.stats import interval

LABELS = {task: f"{task} task" for task in TASKS}  # the random-token runs' rows


def read_runs(runs_dir: Path) -> dict[str, dict[str, Any]]:
    """name -> {"share", "curve": rows by seed} for every run folder under `runs_dir`, by share."""
    found = {}
    for folder in sorted(p for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []:
        if not (folder / "curve.csv").is_file() or not (folder / "metrics.json").is_file():
            raise DataError(f"{folder}: expected curve.csv and metrics.json (run pipelines/induction.py)")
        metrics = json.loads((folder / "metrics.json").read_text())
        share = metrics["repeat_share"]
        label = LABELS.get(metrics.get("data", "text"), f"{share:.0%} repeated")
        with (folder / "curve.csv").open() as f:
            rows = list(csv.DictReader(f))
        curve: dict[int, list[dict[str, float]]] = {}
        for row in rows:
            curve.setdefault(int(row["seed"]), []).append({k: float(v) for k, v in row.items()})
        found[folder.name] = {
            "share": share,
            "data": metrics.get("data", "text"),
            "label": label,
            "curve": curve,
        }
    if not found:
        raise DataError(f"{runs_dir}: no induction runs, expected folders written by pipelines/induction.py")
    labels = [run_["label"] for run_ in found.values()]
    for name, run_ in found.items():  # runs of the same kind are told apart by their folder's name
        if labels.count(run_["label"]) > 1:
            run_["label"] = f"{run_['label']} ({name})"
    return dict(sorted(found.items(), key=lambda item: item[1]["share"]))


def head_score(curve: dict[int, list[dict[str, float]]]) -> str:
    """The column a run's verdict reads: the shifted score where every row has it, else the textbook."""
    has = all("max_shifted_score" in row for rows in curve.values() for row in rows)
    return "max_shifted_score" if has else "max_induction_score"


def verdict(low: float | None, high: float | None, threshold: float) -> str:
    """Where the seeds' interval of the final score lies against the threshold."""
    if low is None or high is None:
        return "not identified (one seed)"
    if low > threshold:
        return "forms"
    if high < threshold:
        return "does not form"
    return "not identified"


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class InductionSummaryPlan(Plan):
    """The `induction_summary` stage's plan."""

    induction: InductionConfig = read(induction_config)


def summarise(plan: InductionSummaryPlan) -> StageResult:
    cfg: InductionConfig = plan.induction
    runs = read_runs(Path(cfg.runs_dir))
    table = []
    for name, run_ in runs.items():
        finals = {seed: rows[-1] for seed, rows in run_["curve"].items()}
        key = head_score(run_["curve"])
        score, low, high = interval([r[key] for r in finals.values()])
        textbook = interval([r["max_induction_score"] for r in finals.values()])
        icl, icl_low, icl_high = interval([r["icl_score"] for r in finals.values()])
        gain, gain_low, gain_high = interval([r["repeat_gain"] for r in finals.values()])
        first = {
            seed: next((int(r["step"]) for r in rows if r[key] > cfg.induction_threshold), None)
            for seed, rows in run_["curve"].items()
        }
        table.append(
            {
                "name": name,
                "repeat_share": run_["share"],
                "label": run_["label"],
                "data": run_["data"],  # text, or a random-token task (the positive control)
                "seeds": sorted(finals),
                "steps": int(next(iter(finals.values()))["step"]),
                "score": "shifted" if key == "max_shifted_score" else "textbook",
                "head_score": [score, low, high],
                "max_induction_score": list(textbook),
                "shift": {str(s): int(r["shift"]) for s, r in finals.items()}
                if key == "max_shifted_score"
                else {},
                "verdict": verdict(low, high, cfg.induction_threshold),
                "first_step_above_threshold": {str(s): step for s, step in first.items()},
                "icl_score": [icl, icl_low, icl_high],
                "repeat_gain": [gain, gain_low, gain_high],
            }
        )
    out = Path(cfg.out_dir)
    figure = _figure(runs, cfg.induction_threshold, out / "induction.png")
    report = {"threshold": cfg.induction_threshold, "shares": table}
    write_json(out / "summary.json", report)
    write_text(out / "summary.md", _markdown(report))
    metrics = {
        **{f"max_induction_score_{row['name']}": row["max_induction_score"][0] for row in table},
        **{f"head_score_{row['name']}": row["head_score"][0] for row in table},
    }
    return StageResult(metrics, [str(out / "summary.json"), str(out / "summary.md"), str(figure)])


def _fmt(values: list[float | None], digits: int = 3) -> str:
    mean, low, high = values
    if low is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Induction heads against the share of training windows that repeat a span",
        "",
        "Each share trains the same model once per seed (pipelines/induction.py); the probe reads random",
        "tokens repeated twice (the best head's induction score, and the loss on each copy) and natural",
        "test text (the ICL score: loss around a late position minus an early one; negative: context helps).",
        "The head score is the shifted one (the best head's attention to the key s positions after the",
        "token that followed the earlier occurrence, for the best shift s >= 0, the lower of two copy",
        "lengths), or the textbook score (s = 0, one length) for curves recorded before the shifted score.",
        f"A head forms when the 95% interval over seeds of the final head score lies above {report['threshold']};",
        "it does not when the interval lies below; otherwise not identified.",
        "",
        "| training windows | seeds | steps | head score (95% interval) | score | shift, by seed | textbook score | verdict | first step above threshold, by seed | copy-loss gain (nats) | ICL score (nats) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["shares"]:
        first = ", ".join(
            "never" if s is None else str(s) for s in row["first_step_above_threshold"].values()
        )
        shifts = ", ".join(str(s) for s in row["shift"].values()) or "-"
        lines.append(
            f"| {row['label']} | {len(row['seeds'])} | {row['steps']} | {_fmt(row['head_score'])} | "
            f"{row['score']} | {shifts} | {_fmt(row['max_induction_score'])} | "
            f"{row['verdict']} | {first} | {_fmt(row['repeat_gain'], 2)} | {_fmt(row['icl_score'], 3)} |"
        )
    return "\n".join(lines) + "\n"


def _figure(runs: dict[str, dict[str, Any]], threshold: float, out: Path) -> Path:
    """Per step, one line per seed: the best head's induction score, the copy-loss gain on the probe's
    repeated random tokens, the loss of the batch trained on (where the curve has it), and the ICL
    score on natural text."""
    fig, (left, middle, task, right) = plt.subplots(1, 4, figsize=(20, 4), dpi=100)
    panels = (  # (axes, column, line style): the shifted score dashed beside the textbook one
        (left, "max_induction_score", "-"),
        (left, "max_shifted_score", "--"),
        (middle, "repeat_gain", "-"),
        (task, "train_loss", "-"),
        (right, "icl_score", "-"),
    )
    for i, run_ in enumerate(runs.values()):
        for j, rows in enumerate(run_["curve"].values()):
            steps = [r["step"] for r in rows]
            for ax, key, style in panels:
                if key not in rows[0]:  # curves written before the column existed
                    continue
                label = run_["label"] if j == 0 and style == "-" else None
                ax.plot(
                    steps, [r[key] for r in rows], style, color=f"C{i}", alpha=0.8, label=label, linewidth=1
                )
    left.axhline(threshold, color="grey", linestyle=":", label="threshold")
    left.set(
        xlabel="training step",
        ylabel="best head's induction score",
        title="induction score (dashed: shifted; a line per seed)",
        ylim=(0, 1),
    )
    middle.axhline(0, color="grey", linestyle=":")
    middle.set(
        xlabel="training step",
        ylabel="first copy's loss - second's (nats)",
        title="copy-loss gain on repeated random tokens",
    )
    task.set(
        xlabel="training step",
        ylabel="training batch's loss (nats)",
        title="loss on the task trained on (a drop: copying found)",
    )
    right.axhline(0, color="grey", linestyle=":")
    right.set(xlabel="training step", ylabel="ICL score (nats)", title="in-context learning on natural text")
    for ax in (left, middle, task, right):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    return save_figure(fig, out)
