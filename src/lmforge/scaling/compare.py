"""The `scaling_compare` stage: two sweeps' fitted laws side by side, and which differences the
bootstrap intervals support.

Each sweep's law is refitted with its bootstrap (resampling its own cells, as in `scaling_fit`); the
two resample independently, so pairing draw i of one with draw i of the other samples the joint
distribution, and a difference is *supported* when its percentile interval excludes 0. The sweeps
must measure the same thing: the same held-out set (same data, tokenizer, eval_tokens), checked by
the cells' evaluation token counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lmforge.errors import DataError
from lmforge.io import write_json, write_text
from lmforge.scaling import law
from lmforge.scaling.analysis import IDENTIFYING, arrays, unidentified, usable
from lmforge.scaling.config import ScalingPlan
from lmforge.scaling.plots import read_json
from lmforge.stage import StageResult


def _boot(rows: list[dict[str, Any]], params: str, s, seed: int) -> law.Bootstrap:
    """The sweep's law with its bootstrap, on the cells `scaling_fit` fits: plateau cells left out,
    seed repeats averaged into their cell and redrawn in each resample."""
    kept, _ = usable(rows)
    x = arrays(kept, params)
    return law.bootstrap(
        x["N"],
        x["D"],
        x["L"],
        groups=[r["name"] for r in kept],
        n_boot=s.fit.n_boot,
        seed=seed,
        level=s.fit.level,
        delta=s.fit.huber_delta,
    )


def run(plan: ScalingPlan) -> StageResult:
    s = plan.scaling
    if not s.against:
        raise DataError(
            "scaling.against is empty; expected the name of the sweep to compare with scaling.name"
        )
    root = Path(s.reports_dir).parent
    names = (s.name, s.against)
    tables = [
        read_json(root / n / "cells.json", f"the scaling_sweep table of sweep {n}")["cells"] for n in names
    ]
    evals = [{r["eval_tokens"] for r in rows} for rows in tables]
    if evals[0] != evals[1] or len(evals[0]) != 1:
        raise DataError(
            f"sweeps {names[0]} and {names[1]} were measured on held-out sets of {sorted(evals[0])} and "
            f"{sorted(evals[1])} tokens; expected one and the same held-out set"
        )
    # independent resamplings: the second sweep's draws come from the next seed
    boots = [_boot(rows, s.fit.params.value, s, s.fit.seed + i) for i, rows in enumerate(tables)]
    rows = law.compare(*boots, level=s.fit.level)
    # A parameter that either sweep does not identify (scaling_fit's rule) has nothing to compare; the
    # exponents a and b are derived from alpha and beta, so they follow those two.
    by_name = {r["name"]: r for r in rows}
    lost = {
        name: any(
            unidentified(name, by_name[name][f"estimate_{side}"], *by_name[name][f"interval_{side}"])
            for side in "ab"
        )
        for name in IDENTIFYING
    }
    lost["a"] = lost["b"] = lost["alpha"] or lost["beta"]
    for r in rows:
        r["identified"] = not lost[r["name"]]
        r["supported"] = r["supported"] and r["identified"]
    plateau = [usable(t)[1] for t in tables]
    level = f"{100 * s.fit.level:.0f}%"
    lines = [
        f"# Scaling laws compared: `{names[0]}` vs `{names[1]}`",
        "",
        f"Each law fitted on its own sweep ({len(tables[0])} and {len(tables[1])} runs, of which "
        f"{len(plateau[0])} and {len(plateau[1])} cells on the unigram plateau are left out); {level} bootstrap "
        f"intervals ({s.fit.n_boot} resamples each); difference = {names[1]} - {names[0]}, supported when "
        "its interval excludes 0.",
        "",
        f"| parameter | {names[0]} | {names[1]} | difference [{level} CI] | supported |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['estimate_a']:.3g} [{r['interval_a'][0]:.3g}, {r['interval_a'][1]:.3g}] | "
            f"{r['estimate_b']:.3g} [{r['interval_b'][0]:.3g}, {r['interval_b'][1]:.3g}] | "
            f"{r['difference']:+.3g} [{r['interval_difference'][0]:+.3g}, {r['interval_difference'][1]:+.3g}] | "
            f"{'yes' if r['supported'] else ('no' if r['identified'] else 'no (not identified by one or both sweeps)')} |"
        )
    supported = [r["name"] for r in rows if r["supported"]]
    lines += [
        "",
        "The intervals support a difference in: "
        + (", ".join(supported) if supported else "none of them")
        + ".",
        "",
    ]
    out = root / f"compare-{names[0]}-vs-{names[1]}"
    write_text(out.with_suffix(".md"), "\n".join(lines))
    write_json(out.with_suffix(".json"), {"a": names[0], "b": names[1], "rows": rows})
    metrics = {f"{r['name']}.difference": r["difference"] for r in rows}
    metrics |= {f"{r['name']}.supported": float(r["supported"]) for r in rows}
    return StageResult(metrics, [str(out.with_suffix(".md")), str(out.with_suffix(".json"))])
