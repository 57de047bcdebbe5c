"""Issue 54's ablation of the speedrun's knobs at equal CPU time (docs/pretraining.md#ablation).

    python -m scripts.ablation commands decoder                       # the default and each knob added alone
    python -m scripts.ablation commands decoder --stack muon,wsd       # a stack, and the stack less each knob
    python -m scripts.ablation commands decoder | sh                   # run them, one after the other
    python -m scripts.ablation table decoder                           # the table, from the runs' reports

Every run is the pretrain stage with the family's default recipe (dvc.yaml's `families`), the knobs'
overrides (`benchmarks.knob_cost.KNOBS`) and one seed (`--seeds`, 1234 and 1 by default), in
`sweeps/recipe/abl-<family>-<row>-s<seed>/` through the knob study's preset (`sweep=recipe`: no
tracking). Each row runs the steps that take the CPU time of the default recipe's `trainer.max_steps`
(the knob study's method): a single knob's from `reports/bench/details/knob_cost.json` (`python -m
benchmarks --only knob_cost`), a stack's measured here the same way, side by side with the default
recipe, before the commands are printed. A knob only adds work to a step, so a row measured faster
than the default (the benchmark's noise, a few percent) runs the default's steps, as do the knobs
that leave the step's computation unchanged (`SAME_STEP`: initial weights, the schedule). Validation runs at each tenth of a run, so every run is
scored at its last step.

The table gives, per row, the last validation loss of each seed, their mean, and the row minus the
default recipe paired by seed with a Student-t interval (`lmforge.stats.paired`; negative: the knob
lowers the loss); and the time to the default recipe's last loss of the same seed as a speed-up over
the default: every run's steps take the same CPU time, so a run's time to that loss is the share of
its steps it needs (interpolated between evaluations), and the speed-up is one over that share
(the default needs all of its steps), averaged over the seeds, or how many seeds never reach it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from lmforge.curves import read_val_curve, steps_to
from lmforge.stats import paired

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "sweeps/recipe"
KNOB_COST = ROOT / "reports/bench/details/knob_cost.json"
DEFAULT = "default"


def knob_overrides(row: str) -> list[str]:
    """`muon+wsd` -> the overrides of those knobs; `default` -> none."""
    from benchmarks.knob_cost import KNOBS

    if row == DEFAULT:
        return []
    overrides: list[str] = []
    for knob in row.split("+"):
        if knob not in KNOBS:
            raise SystemExit(f"ablation: knob {knob!r} is not one of {', '.join(KNOBS)}")
        overrides += KNOBS[knob]
    return overrides


def measured_seconds(family: str) -> dict[str, float]:
    """{row: seconds per step} from the knob_cost benchmark's last run, the default included; a knob
    that leaves the step's computation as it is (`SAME_STEP`) gets the default's."""
    from benchmarks.knob_cost import SAME_STEP

    if not KNOB_COST.exists():
        raise SystemExit(
            f"ablation: {KNOB_COST} is missing; run `python -m benchmarks --only knob_cost` first"
        )
    rows = [r for r in json.loads(KNOB_COST.read_text())["rows"] if r["name"].startswith(f"{family} ")]
    if not rows:
        raise SystemExit(f"ablation: {KNOB_COST} has no row for {family!r}")
    seconds = {r["name"].split(" ", 1)[1]: r["extra"]["seconds_per_step"] for r in rows}
    seconds[DEFAULT] = rows[0]["extra"]["default_seconds_per_step"]
    return {row: seconds[DEFAULT] if row in SAME_STEP else s for row, s in seconds.items()}


def stack_rows(stack: list[str]) -> list[str]:
    """The stack, then the stack less each of its knobs (a single knob less itself is the default)."""
    rows = ["+".join(stack)]
    for knob in stack:
        rest = [k for k in stack if k != knob]
        rows.append("+".join(rest) if rest else DEFAULT)
    return rows


def seconds_per_step(family: str, rows: list[str]) -> dict[str, float]:
    """Seconds per step of each row: single knobs from the benchmark's report, a stack whose knobs but
    one leave the step as it is (`SAME_STEP`) as that one, any other row measured now, interleaved with
    the default recipe, and scaled to the report's default."""
    from benchmarks.knob_cost import SAME_STEP, family_overrides, step_seconds

    seconds = measured_seconds(family)
    for row in rows:  # knobs that leave the step as it is cost nothing in a stack either
        costly = "+".join(k for k in row.split("+") if k not in SAME_STEP) or DEFAULT
        if row not in seconds and costly in seconds:
            seconds[row] = seconds[costly]
    missing = [row for row in rows if row not in seconds]
    if missing:
        base = family_overrides(family)
        now = step_seconds(
            {DEFAULT: base, **{row: [*base, *knob_overrides(row)] for row in missing}}, rounds=20
        )
        for row in missing:
            seconds[row] = now[row] / now[DEFAULT] * seconds[DEFAULT]
    return seconds


def run_name(family: str, row: str, seed: int) -> str:
    return f"abl-{family}-{row}-s{seed}"


def commands(family: str, rows: list[str], seeds: list[int], max_steps: int) -> list[str]:
    from benchmarks.knob_cost import family_overrides

    seconds = seconds_per_step(family, rows)
    lines = []
    for row in rows:
        # a knob adds work to a step or none: a step measured cheaper than the default's is noise
        every = max(1, round(max_steps * min(1.0, seconds[DEFAULT] / seconds[row]) / 10))
        steps = 10 * every
        for seed in seeds:
            args = [
                *family_overrides(family),
                *knob_overrides(row),
                f"seed={seed}",
                f"trainer.max_steps={steps}",
                f"trainer.val_check_interval={every}",
                f"train.checkpoint_every={steps}",
                "train.keep_at=[]",
                f"run_name={run_name(family, row, seed)}",
            ]
            lines.append(
                "python pipelines/pretrain.py sweep=recipe " + " ".join(shlex.quote(a) for a in args)
            )
    return lines


def curves(prefix: str) -> dict[str, dict[int, list[tuple[int, float]]]]:
    """{row: {seed: validation curve}} of every finished run named `<prefix><row>-s<seed>`."""
    found: dict[str, dict[int, list[tuple[int, float]]]] = {}
    for metrics in sorted(RUNS.glob(f"{prefix}*/reports/metrics.json")):
        name = metrics.parent.parent.name
        row, seed = name[len(prefix) :].rsplit("-s", 1)
        found.setdefault(row, {})[int(seed)] = read_val_curve(metrics.parent / "val_loss.csv")
    return found


def table(family: str, prefix: str | None = None, default: str = DEFAULT) -> str:
    """The table of the runs `<prefix><row>-s<seed>` (`abl-<family>-` unless given), each row against
    the row named `default`."""
    runs = curves(prefix or f"abl-{family}-")
    if default not in runs:
        raise SystemExit(f"ablation: no finished run of the {default} {family} recipe under {RUNS}")
    last = {row: {seed: curve[-1][1] for seed, curve in by_seed.items()} for row, by_seed in runs.items()}
    seeds = sorted({seed for by_seed in last.values() for seed in by_seed})
    lines = [
        f"{family}: last validation loss at equal CPU time; time to the default's last loss of the same seed",
        "",
        "| row | steps | "
        + " | ".join(f"seed {s}" for s in seeds)
        + " | mean | row − default [95% CI] | time to target, speed-up |",
        "|---" * (len(seeds) + 5) + "|",
    ]
    order = [default, *sorted(row for row in runs if row != default)]
    for row in order:
        by_seed = last[row]
        mean = sum(by_seed.values()) / len(by_seed)
        steps = next(iter(runs[row].values()))[-1][0]
        cells = " | ".join(f"{by_seed[s]:.3f}" if s in by_seed else "" for s in seeds)
        if row == default:
            diff = ""
        else:
            d = paired(by_seed, last[default], names=(row, default))
            if d.low is None:
                diff = f"{d.mean:+.3f} (one seed: no interval)"
            else:
                diff = f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]: {d.verdict}"
        # every run's steps take the same CPU time, so its time to the target is its share of them
        ratios, shared = [], sorted(set(runs[row]) & set(runs[default]))
        for seed in shared:
            ours = steps_to(runs[row][seed], last[default][seed])
            if ours is not None:
                ratios.append(runs[row][seed][-1][0] / ours)
        if row == default:
            reached = "1"
        elif len(ratios) == len(shared):
            reached = f"{sum(ratios) / len(ratios):.2f}×"
        else:
            reached = f"{len(shared) - len(ratios)} of {len(shared)} seeds not reached"
        lines.append(f"| {row} | {steps} | {cells} | {mean:.3f} | {diff} | {reached} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("commands", "table"))
    parser.add_argument("family", choices=("decoder", "encoder"))
    parser.add_argument("--stack", help="comma-separated knobs: the stack and the stack less each knob")
    parser.add_argument("--seeds", default="1234,1", help="comma-separated seeds (default 1234,1)")
    parser.add_argument(
        "--prefix", help="table: the runs named <prefix><row>-s<seed> (default abl-<family>-)"
    )
    parser.add_argument("--default", default=DEFAULT, help="table: the row the others are compared with")
    args = parser.parse_args(argv)
    if args.what == "table":
        print(table(args.family, args.prefix, args.default))
        return
    from benchmarks.knob_cost import KNOBS, default_max_steps

    rows = stack_rows(args.stack.split(",")) if args.stack else [DEFAULT, *KNOBS]
    for row in rows:
        knob_overrides(row)
    seeds = [int(s) for s in args.seeds.split(",")]
    print("\n".join(commands(args.family, rows, seeds, default_max_steps(args.family))), file=sys.stdout)


if __name__ == "__main__":
    main()
