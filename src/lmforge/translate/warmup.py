"""The `translate_warmup` summary: the 2x2 experiment {Post-LN, Pre-LN} x {Noam warmup, none}.

The course material says that Pre-LN trains without a learning-rate warmup while Post-LN needs one
(Xiong et al. 2020). Each arm trains the same model, data and step budget with at least two seeds
(conf/translate_run/warmup-*.yaml); "no warmup" is a constant rate at the Noam schedule's peak from
step 1. This stage reads each run's validation curve and test BLEU and writes one plot of every
validation curve and one table, whatever the outcome:
{reports_dir}/val_loss.png, summary.md and summary.json (per arm: mean and each seed).
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmforge.errors import ConfigError, DataError
from lmforge.io import atomic_path, write_json, write_text
from lmforge.stage import Plan, StageResult, read
from lmforge.structured import Group


@dataclass(frozen=True)
class WarmupSummaryConfig:
    runs: list[str] = field(default_factory=list)  # run names, e.g. warmup-post-noam-s1
    runs_dir: str = "reports/translate/warmup"  # each run's reports: {runs_dir}/{run}/
    reports_dir: str = "reports/translate/warmup_summary"

    def __post_init__(self) -> None:
        if not self.runs:
            raise ConfigError("warmup_summary.runs: got none, expected the warmup experiment's run names")


warmup_summary_config = Group(WarmupSummaryConfig, "warmup_summary")


def arm_of(run: str) -> str:
    """'warmup-post-noam-s1' -> 'post-noam' (the run name without its prefix and seed)."""
    parts = run.split("-")
    if len(parts) != 4 or parts[0] != "warmup" or not parts[3].startswith("s"):
        raise DataError(
            f"warmup_summary.runs: got {run!r}, expected warmup-<post|pre>-<noam|constant>-s<seed>"
        )
    return f"{parts[1]}-{parts[2]}"


def _read(run_dir: Path) -> dict[str, Any]:
    try:
        with open(run_dir / "val_loss.csv", newline="") as f:
            curve = [(int(r["step"]), float(r["val_loss"])) for r in csv.DictReader(f)]
        metrics = json.loads((run_dir / "metrics.json").read_text())
        evaluation = json.loads((run_dir / "eval.json").read_text())
    except (OSError, ValueError, KeyError) as err:
        raise DataError(
            f"{run_dir}: {err}; expected a finished translate_train and translate_eval run"
        ) from None
    return {"curve": curve, "final_val_loss": metrics["final_val_loss"], "bleu": evaluation["bleu"]}


LABELS = {
    "post-noam": "Post-LN, Noam warmup",
    "post-constant": "Post-LN, no warmup",
    "pre-noam": "Pre-LN, Noam warmup",
    "pre-constant": "Pre-LN, no warmup",
}


def plot(runs: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"post-noam": "C0", "post-constant": "C3", "pre-noam": "C2", "pre-constant": "C1"}
    fig, ax = plt.subplots(figsize=(6, 4))
    seen: set[str] = set()
    for run, data in sorted(runs.items()):
        arm = arm_of(run)
        steps, losses = zip(*data["curve"])
        ax.plot(
            steps,
            losses,
            color=colours.get(arm),
            alpha=0.8,
            label=None if arm in seen else LABELS.get(arm, arm),
        )
        seen.add(arm)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("validation loss (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


@dataclass(frozen=True, kw_only=True, eq=False)
class WarmupPlan(Plan):
    """The `translate_warmup` stage's plan."""

    warmup_summary: WarmupSummaryConfig = read(warmup_summary_config)


def run(plan: WarmupPlan) -> StageResult:
    summary_cfg = plan.warmup_summary
    runs = {name: _read(Path(summary_cfg.runs_dir) / name) for name in summary_cfg.runs}
    arms: dict[str, list[str]] = {}
    for name in runs:
        arms.setdefault(arm_of(name), []).append(name)
    out: dict[str, Any] = {}
    lines = [
        "# Warmup experiment: Post-LN vs Pre-LN, with and without the Noam warmup",
        "",
        "| arm | seeds | final val loss (mean) | test BLEU (mean) | per seed: val loss / BLEU |",
        "|---|---|---|---|---|",
    ]
    for arm in sorted(arms, key=lambda a: list(LABELS).index(a) if a in LABELS else 99):
        names = sorted(arms[arm])
        losses = [runs[n]["final_val_loss"] for n in names]
        bleus = [runs[n]["bleu"] for n in names]
        out[arm] = {
            "final_val_loss": statistics.mean(losses),
            "bleu": statistics.mean(bleus),
            "runs": {
                n: {"final_val_loss": runs[n]["final_val_loss"], "bleu": runs[n]["bleu"]} for n in names
            },
        }
        per_seed = ", ".join(f"{loss:.3f} / {bleu:.2f}" for loss, bleu in zip(losses, bleus))
        lines.append(
            f"| {LABELS.get(arm, arm)} | {len(names)} | {statistics.mean(losses):.3f} | {statistics.mean(bleus):.2f} | {per_seed} |"
        )
    reports = Path(summary_cfg.reports_dir)
    write_text(reports / "summary.md", "\n".join(lines) + "\n")
    write_json(reports / "summary.json", out)
    plot(runs, reports / "val_loss.png")
    metrics = {f"{arm}_{k}": v[k] for arm, v in out.items() for k in ("final_val_loss", "bleu")}
    return StageResult(metrics, [str(reports / n) for n in ("summary.md", "summary.json", "val_loss.png")])
