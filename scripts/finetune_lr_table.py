"""The fine-tuning learning-rate grid's table: one line per run under sweeps/finetune_lr/
(conf/sweep/finetune_lr.yaml), grouped by everything but the rate, the best validation value marked.

    python -m scripts.finetune_lr_table     # markdown on stdout

Each line: the rate, the best validation value of the task's first metric (the only number the
choice reads: test scores stay unseen), the steps run and the step of the best value (a best step
equal to the steps run means the run was still improving when it stopped), and the training seconds
(from the run's timings file, `lmforge.timings`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lmforge.finetune.curves import overrides  # a sweep folder's name -> the overrides it ran with
from lmforge.timings import read_timings  # a run's clock is kept apart from its metrics

ROOT = Path("sweeps/finetune_lr")


def runs(root: Path) -> dict[str, list[dict]]:
    """Finished runs by group (the overrides but the rate), each group sorted by rate."""
    groups: dict[str, list[dict]] = {}
    for metrics_file in sorted(root.glob("*/reports/metrics.json")):
        folder = metrics_file.parent.parent.name
        given = overrides(folder)
        if "finetune.optim.lr" not in given:
            continue
        run = json.loads((metrics_file.parent / "run.json").read_text())
        metrics = json.loads(metrics_file.read_text())
        metric = run["metrics"][0]
        group = ",".join(f"{k}={v}" for k, v in sorted(given.items()) if k != "finetune.optim.lr")
        groups.setdefault(group, []).append(
            {
                "lr": float(given["finetune.optim.lr"]),
                "metric": metric,
                "val": metrics[f"val_{metric}"],
                "steps": metrics["steps"],
                "best_step": metrics["best_step"],
                "seconds": read_timings(metrics_file.parent).get("train_seconds", float("nan")),
            }
        )
    return {g: sorted(rows, key=lambda r: r["lr"]) for g, rows in sorted(groups.items())}


def best(rows: list[dict]) -> dict:
    """The best validation value; a tie goes to the smaller rate (the safer of two equal choices)."""
    return max(rows, key=lambda r: (r["val"], -r["lr"]))


def table(groups: dict[str, list[dict]]) -> str:
    lines = ["| runs | lr | val metric (%) | steps (best) | train s |", "|---|---|---|---|---|"]
    for group, rows in groups.items():
        chosen = best(rows)
        for r in rows:
            mark = " **chosen**" if r is chosen else ""
            lines.append(
                f"| `{group}` | {r['lr']:g}{mark} | {r['metric']} {100 * r['val']:.1f} "
                f"| {r['steps']:.0f} ({r['best_step']:.0f}) | {r['seconds']:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    groups = runs(args.root)
    if not groups:
        print(
            f"{args.root}: no finished runs with a finetune.optim.lr override; expected the grid's folders",
            file=sys.stderr,
        )
        raise SystemExit(2)
    print(table(groups))


if __name__ == "__main__":
    main()
