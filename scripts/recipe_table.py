"""The pretraining knob study's table: one row per run under sweeps/recipe/ (conf/experiment/recipe_study.yaml).

    python -m scripts.recipe_table                 # every run, markdown on stdout
    python -m scripts.recipe_table --match decoder # runs whose name contains a string
    python -m scripts.recipe_table --compact --target 5.719   # one column per quantity, not per step

Each row: the overrides that name the run, the validation loss at each evaluation (MLM runs are
scored at objective.eval_mlm_probability, 15%, whatever rate they train at), the last validation
accuracy, and the run's seconds per optimizer step (wall time, from its timings file, over steps, validation included; runs
that shared the CPU with others are slower, so compare speeds in benchmarks/, not here). With
`--compact`, for runs of different lengths: the steps run, the last and the lowest validation loss
(with its step), the last accuracy and, with `--target`, the step at which the curve first reaches
that loss (linear between evaluations, as the time-to-quality benchmark reads it).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from lmforge.curves import steps_to
from lmforge.timings import read_timings

ROOT = Path("sweeps/recipe")


def rows(root: Path, match: str | None) -> list[dict]:
    found = []
    for metrics_file in sorted(root.glob("*/reports/metrics.json")):
        run = metrics_file.parent.parent.name
        if match and match not in run:
            continue
        metrics = json.loads(metrics_file.read_text())
        with open(metrics_file.parent / "val_loss.csv", newline="") as f:
            curve = list(csv.DictReader(f))
        clock = read_timings(metrics_file.parent)  # the run's seconds: its timings file (lmforge.timings)
        found.append({"run": run, "metrics": metrics, "curve": curve, "clock": clock})
    return found


def table(found: list[dict]) -> str:
    steps = sorted({int(point["step"]) for row in found for point in row["curve"]})
    header = ["run", *[f"val loss @{s}" for s in steps], "val acc", "s/step"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in found:
        by_step = {int(p["step"]): p for p in row["curve"]}
        losses = [f"{float(by_step[s]['val_loss']):.3f}" if s in by_step else "" for s in steps]
        last = row["curve"][-1] if row["curve"] else {}
        accuracy = f"{float(last['val_accuracy']):.1%}" if last.get("val_accuracy") else ""
        m = row["metrics"]
        seconds = row["clock"].get("wall_seconds")
        per_step = f"{seconds / m['steps']:.2f}" if m.get("steps") and seconds is not None else ""
        lines.append("| " + " | ".join([f"`{row['run']}`", *losses, accuracy, per_step]) + " |")
    return "\n".join(lines)


def compact(found: list[dict], target: float | None) -> str:
    header = ["run", "steps", "last val loss (step)", "lowest (step)", "val acc"]
    if target is not None:
        header.append(f"steps to {target:g}")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in found:
        points = [(int(p["step"]), float(p["val_loss"])) for p in row["curve"]]
        if not points:
            continue
        step, loss = min(points, key=lambda p: p[1])
        cells = [
            f"`{row['run']}`",
            str(row["metrics"].get("steps", "")),
            f"{points[-1][1]:.3f} ({points[-1][0]})",
            f"{loss:.3f} ({step})",
            f"{float(row['curve'][-1]['val_accuracy']):.1%}",
        ]
        if target is not None:
            reached = steps_to(points, target)
            cells.append(f"{reached:.0f}" if reached is not None else "not reached")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--match", help="only runs whose name contains this string")
    parser.add_argument(
        "--compact", action="store_true", help="last and lowest loss, not one column per step"
    )
    parser.add_argument(
        "--target", type=float, help="with --compact: the step each run first reaches this loss"
    )
    args = parser.parse_args()
    if args.target is not None and not args.compact:
        print(
            f"--target {args.target:g}: only read with --compact, expected both or neither", file=sys.stderr
        )
        raise SystemExit(2)
    found = rows(args.root, args.match)
    if not found:
        print(
            f"{args.root}: no finished runs (reports/metrics.json); expected the knob study's folders",
            file=sys.stderr,
        )
        raise SystemExit(2)
    print(compact(found, args.target) if args.compact else table(found))


if __name__ == "__main__":
    main()
