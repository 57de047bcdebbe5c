"""Tables of the searches run by `python -m scripts.search` (docs/pretraining.md#search), from each
study's study.json.

    python -m scripts.search_table sweeps/search/search_decoder sweeps/search/search_decoder_grid
    python -m scripts.search_table --seeds sweeps/search/confirm_tpe sweeps/search/confirm_grid

The first form gives, per study, the best score after each number of finished trials (so samplers
compare at equal trials) and the settings of its best trial. With `--seeds`, each folder is a study
of one setting over `seed=choice(...)` (a grid), and the table compares the first with the second,
paired by seed, with a Student-t interval (`lmforge.stats.paired`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lmforge.stats import mean_std, paired


def load(folder: Path) -> dict:
    return json.loads((folder / "study.json").read_text(encoding="utf-8"))


def best_so_far(study: dict) -> list[float | None]:
    """The best score among the first k finished trials, for k = 1..n (None before any completed)."""
    pick = min if study["direction"] == "minimize" else max
    out: list[float | None] = []
    best = None
    for trial in study["trials"]:
        if trial["state"] == "COMPLETE":
            best = trial["value"] if best is None else pick(best, trial["value"])
        out.append(best)
    return out


def settings(params: dict) -> str:
    return ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in sorted(params.items())
    )


def search_table(folders: list[Path]) -> str:
    studies = [load(folder) for folder in folders]
    n = max(len(s["trials"]) for s in studies)
    marks = sorted({k for k in (1, 2, 4, 8, 12, 16, 24, 32, n) if k <= n})
    head = "| study (sampler) | " + " | ".join(f"best of {k}" for k in marks) + " | best trial: settings |"
    lines = [head, "|---" * (len(marks) + 2) + "|"]
    for study in studies:
        curve = best_so_far(study)
        cells = [f"{curve[k - 1]:.3f}" if k <= len(curve) and curve[k - 1] is not None else "" for k in marks]
        best = study["best"]
        where = f"#{best['number']}: {settings(best['params'])}" if best else "none completed"
        lines.append(f"| {study['study']} ({study['sampler']}) | " + " | ".join(cells) + f" | {where} |")
    failed = {s["study"]: sum(t["state"] != "COMPLETE" for t in s["trials"]) for s in studies}
    notes = [f"{name}: {k} trial(s) failed" for name, k in failed.items() if k]
    return "\n".join(lines + ([""] + notes if notes else []))


def by_seed(study: dict) -> dict[int, float]:
    seeds: dict[int, float] = {}
    for trial in study["trials"]:
        if trial["state"] == "COMPLETE":
            seeds[int(trial["params"]["seed"])] = trial["value"]
    return seeds


def seeds_table(a_folder: Path, b_folder: Path) -> str:
    a, b = load(a_folder), load(b_folder)
    a_seeds, b_seeds = by_seed(a), by_seed(b)
    d = paired(a_seeds, b_seeds, names=(a["study"], b["study"]))
    lines = [
        "| study | " + " | ".join(f"seed {s}" for s in sorted(a_seeds)) + " | mean |",
        "|---" * (len(a_seeds) + 2) + "|",
    ]
    for study, seeds in ((a, a_seeds), (b, b_seeds)):
        mean, _ = mean_std(list(seeds.values()))
        lines.append(
            f"| {study['study']} | "
            + " | ".join(f"{seeds[s]:.3f}" for s in sorted(seeds))
            + f" | {mean:.3f} |"
        )
    span = f"[{d.low:+.3f}, {d.high:+.3f}]" if d.low is not None else "(one seed)"
    lines += ["", f"{a['study']} − {b['study']}: {d.mean:+.3f} {span}, {d.n} seeds: {d.verdict}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="study folders (each holding study.json)")
    parser.add_argument("--seeds", action="store_true", help="compare two one-setting studies over seeds")
    args = parser.parse_args(argv)
    if args.seeds and len(args.folders) != 2:
        parser.error(f"--seeds: got {len(args.folders)} folders, expected two")
    missing = [str(f) for f in args.folders if not (f / "study.json").is_file()]
    if missing:
        parser.error(
            f"no study.json in {missing[0]}; expected a folder a finished `python -m scripts.search` wrote"
        )
    print(seeds_table(*args.folders) if args.seeds else search_table(args.folders))


if __name__ == "__main__":
    main()
