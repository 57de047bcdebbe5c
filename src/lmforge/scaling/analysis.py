"""The `scaling_fit` stage: the sweep's cells -> fitted laws with confidence intervals, and the table
beside the published ones.

- Approach 3 (Hoffmann et al. 2022): L(N, D) = E + A/N^alpha + B/D^beta on every cell (Huber loss on
  log-loss, multi-start L-BFGS; `lmforge.scaling.law`), with bootstrap intervals over cells, how well
  each parameter is constrained (interval width relative to the estimate, and the correlations of the
  bootstrap draws), and the error on held-out cells: fitted on all but the largest-compute ones,
  predicting those. The law's compute-optimal exponents a = beta/(alpha+beta), b = alpha/(alpha+beta).
- Approach 2 (IsoFLOP; `lmforge.scaling.isoflop`): per compute budget a parabola in log N, its
  minimum N_opt and D_opt, N_opt ~ C^a and D_opt ~ C^b, tokens per parameter, residual-bootstrap
  intervals. A slice whose parabola opens downwards or whose minimum lies outside its sizes is
  reported and left out of the exponents (it says the sizes do not straddle the optimum).

Outputs in `scaling.reports_dir`: fit.json (everything, for the plots), metrics.json (flat numbers for
`dvc metrics`) and law.md.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from lmforge.errors import DataError
from lmforge.io import write_json, write_text
from lmforge.scaling import isoflop, law
from lmforge.scaling.config import ScalingConfig, ScalingPlan
from lmforge.scaling.plots import read_json
from lmforge.stage import StageResult

PARAMS = ("E", "A", "B", "alpha", "beta", "a", "b")

# Published fits, for the comparison table: (source, alpha, beta, a, b, tokens per parameter, note).
PUBLISHED = (
    (
        "Chinchilla, approach 3 (Hoffmann et al. 2022)",
        0.34,
        0.28,
        0.46,
        0.54,
        None,
        "E=1.69, A=406.4, B=410.7",
    ),
    ("Chinchilla, approach 2 (IsoFLOP)", None, None, 0.49, 0.51, 20.0, "~20 tokens per parameter"),
    (
        "Epoch AI refit of approach 3 (Besiroglu et al. 2024)",
        0.35,
        0.37,
        0.51,
        0.49,
        20.0,
        "E=1.82, A=482, B=2085",
    ),
    ("Kaplan et al. 2020", 0.076, 0.095, 0.73, 0.27, None, "alpha_N, alpha_D of L(N), L(D); N non-embedding"),
)
TINY_SCALE = (
    "Why tiny-scale numbers may differ: these models have 10^3-10^6 parameters, not 10^7-10^10; the "
    "embedding and vocabulary head are a large share of their parameters and compute, so whether N "
    "counts them changes the exponents (Kaplan counted non-embedding parameters, Chinchilla all of them, "
    "Porian et al. 2024 trace much of the two papers' disagreement to this and to the last layer's "
    "compute); the peak learning rate follows one width rule measured on three sizes, and one batch size "
    "serves every size; the corpus is a ~10M-token mixture with a 1024-token vocabulary, so E and the data term B/D^beta "
    "belong to this data; and a few points per axis leave wide intervals."
)


def arrays(rows: list[dict[str, Any]], params: str) -> dict[str, np.ndarray]:
    key = f"params_{params}"
    return {
        "N": np.array([r[key] for r in rows], dtype=float),
        "D": np.array([r["tokens"] for r in rows], dtype=float),
        "L": np.array([r["val_loss"] for r in rows], dtype=float),
        "C": np.array([r["flops"] for r in rows], dtype=float),
        "budget": np.array([r["budget"] if r["budget"] is not None else math.nan for r in rows], dtype=float),
    }


def usable(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows the laws are fitted on, and the names of the cells left out because they never left
    the unigram plateau (flagged by the sweep; tables written before the flag count every row)."""
    kept = [r for r in rows if not r.get("plateau", False)]
    return kept, sorted({r["name"] for r in rows if r.get("plateau", False)})


def by_cell(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each cell (one per seed), by cell name, in the order cells first appear."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["name"], []).append(r)
    return groups


def means(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per cell: a cell trained under several seeds gets its mean loss (its first row's
    other values), in the order cells first appear."""
    return [{**g[0], "val_loss": float(np.mean([r["val_loss"] for r in g]))} for g in by_cell(rows).values()]


def seed_noise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per cell trained under several seeds: n, mean and standard deviation of the held-out loss;
    and their pooled standard deviation (root of the mean variance)."""
    losses = {name: [float(r["val_loss"]) for r in g] for name, g in by_cell(rows).items()}
    cells = [
        {"name": name, "n": len(v), "mean": float(np.mean(v)), "std": float(np.std(v, ddof=1))}
        for name, v in losses.items()
        if len(v) > 1
    ]
    pooled = float(np.sqrt(np.mean([c["std"] ** 2 for c in cells]))) if cells else None
    return {"cells": cells, "pooled_std": pooled}


# The fit's bounds (law.py): E, A, B > 0 in log space, 0 <= alpha, beta <= 3.
AT_BOUND = {"E": lambda v: v < 1e-6, "alpha": lambda v: v <= 1e-6 or v >= 3 - 1e-6}
AT_BOUND["beta"] = AT_BOUND["alpha"]
IDENTIFYING = ("E", "alpha", "beta")  # compute-optimal allocations are derived only when all three are
LAW_PARAMS = law.COLUMNS[:5]  # E, A, B, alpha, beta: the fitted ones (a and b are derived)


def n_label(params: str) -> str:
    """What N counts, in words, for `scaling.fit.params`."""
    return "non-embedding parameters" if params == "non_embedding" else "all parameters"


def constraint(name: str, estimate: float, lo: float, hi: float) -> str:
    """How well the data pin a parameter: at a bound of the fit, or the interval's width relative to
    the estimate."""
    hits = AT_BOUND.get(name, lambda v: False)
    if hits(estimate):
        return "at the fit's bound: not identified by these cells"
    if hits(lo) or hits(hi):
        return "poorly constrained (the interval reaches the fit's bound)"
    width = (hi - lo) / abs(estimate) if estimate else math.inf
    if width < 0.25:
        return "well constrained"
    if width < 1.0:
        return "loosely constrained"
    return "poorly constrained"


def unidentified(name: str, estimate: float, lo: float, hi: float) -> str | None:
    """Why the sweep does not identify a parameter of the law, or None when it does: the estimate or
    its interval reaches a bound of the fit, or the interval is wider than the estimate itself."""
    hits = AT_BOUND.get(name, lambda v: False)
    if hits(estimate):
        return "at the fit's bound"
    if hits(lo) or hits(hi):
        return "its interval reaches the fit's bound"
    if hi - lo > abs(estimate):
        return "its interval is wider than the estimate"
    return None


def fit_sweep(
    rows: list[dict[str, Any]], s: ScalingConfig, baseline: dict[str, float] | None = None
) -> dict[str, Any]:
    """Both approaches on a sweep's result rows (see the module docstring)."""
    if not rows:
        raise DataError("scaling fit: the sweep's table has no cells; expected the scaling_sweep results")
    kept, plateau = usable(rows)
    cells = means(kept)
    facts = table_facts(rows, kept, cells, plateau, s, baseline)
    if plateau and len(cells) < MIN_CELLS:  # a measured outcome of the sweep: reported, not raised
        return no_law(facts, cells, s)
    x = arrays(kept, s.fit.params.value)
    delta = s.fit.huber_delta
    boot = law.bootstrap(
        x["N"],
        x["D"],
        x["L"],
        groups=[r["name"] for r in kept],
        n_boot=s.fit.n_boot,
        seed=s.fit.seed,
        level=s.fit.level,
        delta=delta,
    )
    fitted = boot.fit
    xc = arrays(cells, s.fit.params.value)
    n_held = max(1, round(s.fit.holdout_fraction * len(cells)))
    held = law.holdout(xc["N"], xc["D"], xc["L"], xc["C"], n_holdout=n_held, delta=delta)
    point = boot.estimate
    intervals = {k: [float(v) for v in boot.intervals[k]] for k in PARAMS}
    logs = np.log(boot.samples[:, :5])
    correlations = np.corrcoef(logs.T) if len(logs) > 2 else np.full((5, 5), np.nan)
    reasons = {k: unidentified(k, point[k], *intervals[k]) for k in IDENTIFYING}
    result: dict[str, Any] = {
        **facts,
        "law": {k: point[k] for k in LAW_PARAMS},
        "law_ci": {k: intervals[k] for k in LAW_PARAMS},
        "constraint": {k: constraint(k, point[k], *intervals[k]) for k in LAW_PARAMS},
        "identified": {k: reason is None for k, reason in reasons.items()},
        "not_identified": {k: reason for k, reason in reasons.items() if reason is not None},
        "correlation_log": {
            f"{PARAMS[i]}~{PARAMS[j]}": float(correlations[i, j]) for i in range(5) for j in range(i + 1, 5)
        },
        "at_bound": bool(fitted.at_bound),
        "bootstrap": {"n_boot": s.fit.n_boot, "failed": int(boot.n_failed), "level": s.fit.level},
        "huber_objective": float(fitted.objective),
        "converged_starts": f"{fitted.converged_starts}/{fitted.n_starts}",
        "holdout": {
            "cells": [cells[r["index"]]["name"] for r in held["rows"]],
            "rows": held["rows"],
            "mean_abs_rel_error": float(held["mean_abs_rel_error"]),
        },
        "isoflop": fit_isoflop(xc, s),
        # Approach 2 needs no law: under the other count of N (Kaplan's non-embedding, Chinchilla's
        # total) it costs one more parabola per slice, and the two can disagree at this scale.
        "isoflop_other": {
            "params": other_count(s.fit.params.value),
            **fit_isoflop(arrays(cells, other_count(s.fit.params.value)), s),
        },
    }
    result["derived"] = derived(boot, xc, s.fit.level) if not result["not_identified"] else None
    result["summary"] = summary(result)
    return result


MIN_CELLS = law.N_PARAMS + 2  # what law.fit_law needs


def table_facts(
    rows: list[dict[str, Any]],
    kept: list[dict[str, Any]],
    cells: list[dict[str, Any]],
    plateau: list[str],
    s: ScalingConfig,
    baseline: dict[str, float] | None,
) -> dict[str, Any]:
    """What every fit reports about its table: runs, fitted cells (`cells`, the means of the `kept`
    rows), the plateau cells, the seed noise."""
    return {
        "params": s.fit.params.value,
        "n_rows": len(rows),
        "n_cells": len(cells),
        "plateau": {"cells": plateau, "margin": s.plateau_margin, "baseline": baseline},
        "noise": seed_noise(kept),
    }


def no_law(facts: dict[str, Any], cells: list[dict[str, Any]], s: ScalingConfig) -> dict[str, Any]:
    """The fit of a sweep whose cells mostly never left the unigram plateau: too few remain for the
    law, so none is fitted and nothing is derived; the report says so and lists the plateau cells."""
    plateau = facts["plateau"]["cells"]
    why = f"only {len(cells)} cells left the unigram plateau; the law needs {MIN_CELLS}"
    result: dict[str, Any] = {
        **facts,
        "law": None,
        "identified": {k: False for k in IDENTIFYING},
        "not_identified": {k: why for k in IDENTIFYING},
        "derived": None,
        "isoflop": fit_isoflop(arrays(cells, s.fit.params.value), s),
    }
    result["summary"] = (
        f"no law is fitted: {len(plateau)} of {len(plateau) + len(cells)} cells never left the unigram plateau and "
        f"{len(cells)} did, where the 5-parameter law needs {MIN_CELLS}; nothing is derived."
    )
    return result


def other_count(params: str) -> str:
    """The count of N that the fit's `params` is not."""
    return "total" if params == "non_embedding" else "non_embedding"


def derived(boot: law.Bootstrap, x: dict[str, np.ndarray], level: float) -> dict[str, Any]:
    """The law's compute-optimal allocation, each figure with its bootstrap interval: the exponents
    a and b, and tokens per parameter at each IsoFLOP budget (or at the sweep's largest compute)."""
    budgets = sorted(set(x["budget"][np.isfinite(x["budget"])])) or [float(x["C"].max())]
    samples = [law.Law(*row[:5]) for row in boot.samples]
    tpp = []
    for c in budgets:
        draws = np.array([sample.tokens_per_parameter(c) for sample in samples], dtype=float)
        lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
        tpp.append({"budget": float(c), "value": float(boot.fit.law.tokens_per_parameter(c)), "ci": [lo, hi]})
    return {
        "a": boot.estimate["a"],
        "a_ci": list(boot.intervals["a"]),
        "b": boot.estimate["b"],
        "b_ci": list(boot.intervals["b"]),
        "tokens_per_parameter": tpp,
    }


def summary(fit: dict[str, Any]) -> str:
    """One line: what the sweep identifies and what it does not, and what was left out."""
    point, ci = fit["law"], fit["law_ci"]
    parts = []
    for k in IDENTIFYING:
        reason = fit["not_identified"].get(k)
        estimate = f"{k} = {_ci(point[k], ci[k])}"
        parts.append(
            f"{estimate}: not identified by this sweep ({reason})" if reason else f"{estimate}: identified"
        )
    if fit["derived"] is None:
        parts.append("no compute-optimal allocation is derived from the law")
    else:
        tpp = fit["derived"]["tokens_per_parameter"][-1]
        parts.append(
            f"compute-optimal tokens per parameter {_ci(tpp['value'], tpp['ci'])} at C = {tpp['budget']:.2g}"
        )
    iso = fit["isoflop"]
    inside = sum(1 for p in iso["slices"] if p["inside"])
    parts.append(f"{inside} of {len(iso['slices'])} IsoFLOP slices have a minimum inside their sizes")
    plateau = fit["plateau"]["cells"]
    parts.append(f"{len(plateau)} cell(s) on the unigram plateau left out")
    if fit["noise"]["pooled_std"] is not None:
        parts.append(
            f"seed noise {fit['noise']['pooled_std']:.3g} nats (std over seeds, "
            f"{len(fit['noise']['cells'])} cells)"
        )
    return "; ".join(parts) + "."


def fit_isoflop(x: dict[str, np.ndarray], s: ScalingConfig) -> dict[str, Any]:
    on_slice = np.isfinite(x["budget"])
    out: dict[str, Any] = {"slices": [], "excluded": []}
    if not on_slice.any():
        out["excluded"].append("no IsoFLOP slices in the sweep")
        return out
    good = np.zeros(len(x["N"]), dtype=bool)
    for budget in sorted(set(x["budget"][on_slice])):
        pick = x["budget"] == budget
        try:
            (piece,) = isoflop.fit_slices(x["N"][pick], x["D"][pick], x["budget"][pick], x["L"][pick])
        except law.FitError as err:
            out["excluded"].append(f"C={budget:.3g}: {err}")
            continue
        entry = {
            "budget": piece.C,
            "n_opt": piece.N_opt,
            "d_opt": piece.D_opt,
            "loss_opt": piece.loss_opt,
            "inside": piece.inside,
            # loss = loss_opt + curvature (ln N - ln N_opt)^2, as polynomial coefficients in ln N
            "coeffs": [
                piece.curvature,
                -2 * piece.curvature * np.log(piece.N_opt),
                piece.loss_opt + piece.curvature * np.log(piece.N_opt) ** 2,
            ],
        }
        if piece.inside:
            good |= pick
        else:
            out["excluded"].append(
                f"C={budget:.3g}: the slice does not straddle its optimum (its parabola's minimum lies "
                "outside the sampled sizes, or its best measured cell is its smallest or largest size)"
            )
        out["slices"].append(entry)
    inside = [p for p in out["slices"] if p["inside"]]
    if len(inside) < 2:
        out["excluded"].append(
            f"{len(inside)} slice(s) with a minimum inside their sizes; the exponents need 2"
        )
        return out
    boot = isoflop.bootstrap_isoflop(
        x["N"][good],
        x["D"][good],
        x["budget"][good],
        x["L"][good],
        n_boot=s.fit.n_boot,
        seed=s.fit.seed,
        level=s.fit.level,
    )
    point = boot.point
    out |= {
        "a": point.a,
        "b": point.b,
        "a_ci": list(boot.intervals["a"]),
        "b_ci": list(boot.intervals["b"]),
        "bootstrap_failed": int(boot.n_failed),
    }
    out["tokens_per_parameter"] = [
        {"budget": c, "value": v, "ci": list(ci)}
        for c, v, ci in zip(point.budgets, point.tokens_per_parameter, boot.tpp_intervals)
    ]
    return out


def flat_metrics(fit: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {"cells": fit["n_cells"], "cells_on_plateau": len(fit["plateau"]["cells"])}
    if fit["law"] is None:
        return out
    for k, value in fit["law"].items():
        out[f"law.{k}"] = value
        out[f"law.{k}_lo"], out[f"law.{k}_hi"] = fit["law_ci"][k]
    for k, ok in fit["identified"].items():
        out[f"law.{k}_identified"] = float(ok)
    out["law.holdout_mean_abs_rel_error"] = fit["holdout"]["mean_abs_rel_error"]
    if fit["derived"] is not None:
        for k in ("a", "b"):
            out[f"law.{k}"] = fit["derived"][k]
            out[f"law.{k}_lo"], out[f"law.{k}_hi"] = fit["derived"][f"{k}_ci"]
    iso = fit["isoflop"]
    if "a" in iso:
        out["isoflop.a"], out["isoflop.b"] = iso["a"], iso["b"]
        out["isoflop.a_lo"], out["isoflop.a_hi"] = iso["a_ci"]
        out["isoflop.b_lo"], out["isoflop.b_hi"] = iso["b_ci"]
        for p in iso["tokens_per_parameter"]:
            budget = f"{p['budget']:.0e}".replace("+", "")  # MLflow names: letters, digits, _-. /
            out[f"isoflop.tokens_per_param.C{budget}"] = p["value"]
    other = fit.get("isoflop_other", {})
    if "a" in other:
        prefix = f"isoflop_{other['params']}"
        out[f"{prefix}.a"], out[f"{prefix}.b"] = other["a"], other["b"]
        out[f"{prefix}.a_lo"], out[f"{prefix}.a_hi"] = other["a_ci"]
        out[f"{prefix}.b_lo"], out[f"{prefix}.b_hi"] = other["b_ci"]
    if fit["noise"]["pooled_std"] is not None:
        out["seed_std"] = fit["noise"]["pooled_std"]
    return out


def _ci(value: float, ci: list[float] | tuple[float, float], digits: int = 3) -> str:
    return f"{value:.{digits}g} [{ci[0]:.{digits}g}, {ci[1]:.{digits}g}]"


def report(fit: dict[str, Any], s: ScalingConfig) -> str:
    level = f"{100 * s.fit.level:.0f}%"
    law_, ci = fit["law"], fit.get("law_ci")
    n_name = n_label(fit["params"])
    plateau, noise = fit["plateau"], fit["noise"]
    lines = [f"# Scaling laws of sweep `{s.name}`", "", f"**Summary.** {fit['summary']}", ""]
    if law_ is None:
        lines += [f"{fit['n_rows']} runs; no law is fitted.", ""]
    else:
        repeats = fit["n_rows"] - fit["n_cells"] - len(plateau["cells"])
        lines += [
            f"{fit['n_cells']} cells fitted ({fit['n_rows']} runs: {repeats} seed repeats averaged into their "
            f"cells, {len(plateau['cells'])} plateau cells left out); N = {n_name}, D = training tokens, "
            f"L = held-out loss (nats/token); intervals are {level} bootstrap percentiles "
            f"({fit['bootstrap']['n_boot']} resamples of the cells and of each repeated cell's seeds, "
            f"{fit['bootstrap']['failed']} failed).",
            "",
        ]
    base = plateau.get("baseline")
    if base:
        lines.append(
            f"Unigram baseline on the same held-out tokens: loss {base['loss']:.4f}, accuracy "
            f"{100 * base['accuracy']:.2f}%. A cell within {plateau['margin']:g} nats of that loss, or at "
            "that accuracy (one token predicted everywhere), is on the plateau: "
            + (", ".join(plateau["cells"]) if plateau["cells"] else "none")
            + "."
        )
        lines.append("")
    if noise["cells"]:
        lines += [
            f"Seed noise: pooled standard deviation {noise['pooled_std']:.4f} nats.",
            "",
            "| cell | seeds | mean loss | std |",
            "|---|---|---|---|",
        ]
        lines += [f"| {c['name']} | {c['n']} | {c['mean']:.4f} | {c['std']:.4f} |" for c in noise["cells"]]
        lines.append("")
    if fit["law"] is None:
        return "\n".join([*lines, TINY_SCALE, ""])
    lines += [
        "## Approach 3: L(N, D) = E + A/N^alpha + B/D^beta",
        "",
        f"| parameter | estimate [{level} CI] | how well the sweep constrains it |",
        "|---|---|---|",
    ]
    for k in law_:
        lines.append(f"| {k} | {_ci(law_[k], ci[k])} | {fit['constraint'][k]} |")
    strong = [f"{k} ({v:+.2f})" for k, v in fit["correlation_log"].items() if abs(v) > 0.8]
    derived_ = fit["derived"]
    if derived_ is None:
        missing = ", ".join(f"{k} ({r})" for k, r in fit["not_identified"].items())
        lines += [
            "",
            f"Not identified by this sweep: {missing}. The law's compute-optimal exponents "
            "a = beta/(alpha+beta), b = alpha/(alpha+beta) and its tokens per parameter are therefore "
            "not derived: they would only restate where the fit stopped.",
        ]
    else:
        tpp = ", ".join(
            f"{_ci(p['value'], p['ci'])} at C={p['budget']:.2g}" for p in derived_["tokens_per_parameter"]
        )
        lines += [
            "",
            f"Compute-optimal exponents (N_opt ~ C^a, D_opt ~ C^b under C = 6ND): a = "
            f"{_ci(derived_['a'], derived_['a_ci'])}, b = {_ci(derived_['b'], derived_['b_ci'])}; "
            f"tokens per parameter at the optimum: {tpp}.",
        ]
    lines += [
        "Strongly correlated bootstrap draws (|r| > 0.8, log scale): " + (", ".join(strong) or "none") + ".",
        "",
        f"Held-out cells (the {len(fit['holdout']['cells'])} of largest compute, predicted by a fit on the "
        f"rest): mean absolute relative error {100 * fit['holdout']['mean_abs_rel_error']:.2f}%.",
        "",
        "| cell | N | D | measured | predicted | error |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in zip(fit["holdout"]["cells"], fit["holdout"]["rows"]):
        lines.append(
            f"| {name} | {row['N']:,.0f} | {row['D']:,.0f} | {row['actual']:.4f} | {row['predicted']:.4f} | "
            f"{100 * row['rel_error']:+.2f}% |"
        )
    iso = fit["isoflop"]
    lines += ["", "## Approach 2: IsoFLOP slices", ""]
    if iso["slices"]:
        lines += [
            "| C (FLOPs) | N_opt | D_opt | tokens/param | loss at N_opt | minimum inside sizes |",
            "|---|---|---|---|---|---|",
        ]
        for p in iso["slices"]:
            lines.append(
                f"| {p['budget']:.3g} | {p['n_opt']:,.0f} | {p['d_opt']:,.0f} | {p['d_opt'] / p['n_opt']:.3g} | "
                f"{p['loss_opt']:.4f} | {'yes' if p['inside'] else 'no'} |"
            )
    for reason in iso["excluded"]:
        lines.append(f"\nLeft out: {reason}.")
    lines += isoflop_exponents(iso)
    other = fit.get("isoflop_other")
    if other and other.get("slices"):
        other_name = n_label(other["params"])
        lines += [
            "",
            f"With N = {other_name} instead (the same cells; the count of N moves N_opt and so the "
            "exponents and tokens per parameter):",
        ]
        lines += [
            f"C = {p['budget']:.3g}: N_opt {p['n_opt']:,.0f}, {p['d_opt'] / p['n_opt']:.3g} tokens per parameter, "
            f"minimum inside its sizes: {'yes' if p['inside'] else 'no'}."
            for p in other["slices"]
        ]
        lines += isoflop_exponents(other)
    lines += ["", "## Beside the published laws", ""]
    lines += [
        "| source | alpha | beta | a (N_opt ~ C^a) | b (D_opt ~ C^b) | tokens/param | note |",
        "|---|---|---|---|---|---|---|",
    ]
    iso_a = _ci(iso["a"], iso["a_ci"]) if "a" in iso else "n/a"
    iso_b = _ci(iso["b"], iso["b_ci"]) if "b" in iso else "n/a"
    tpp_iso = iso["tokens_per_parameter"][-1] if iso.get("tokens_per_parameter") else None

    def shown(k: str) -> str:
        text = _ci(law_[k], ci[k])
        return text if fit["identified"].get(k, True) else f"{text} (not identified)"

    if derived_ is None:
        law_a = law_b = law_tpp = "not derived"
    else:
        last = derived_["tokens_per_parameter"][-1]
        law_a, law_b = _ci(derived_["a"], derived_["a_ci"]), _ci(derived_["b"], derived_["b_ci"])
        law_tpp = f"{_ci(last['value'], last['ci'])} at C={last['budget']:.2g}"
    lines.append(
        f"| this sweep, approach 3 | {shown('alpha')} | {shown('beta')} | {law_a} | {law_b} | {law_tpp} | "
        f"N = {n_name} |"
    )
    lines.append(
        f"| this sweep, approach 2 | | | {iso_a} | {iso_b} | "
        f"{_ci(tpp_iso['value'], tpp_iso['ci']) if tpp_iso else 'n/a'} | "
        f"{'at C=' + format(tpp_iso['budget'], '.2g') + ', ' if tpp_iso else ''}N = {n_name} |"
    )
    if other and "a" in other:
        last = other["tokens_per_parameter"][-1]
        other_name = n_label(other["params"])
        lines.append(
            f"| this sweep, approach 2 | | | {_ci(other['a'], other['a_ci'])} | {_ci(other['b'], other['b_ci'])} | "
            f"{_ci(last['value'], last['ci'])} | at C={last['budget']:.2g}, N = {other_name} |"
        )
    for name, alpha, beta, a, b, tpp_pub, note in PUBLISHED:
        cells = [f"{v:.3g}" if v is not None else "" for v in (alpha, beta, a, b, tpp_pub)]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {note} |")
    lines += ["", TINY_SCALE, ""]
    return "\n".join(lines)


def isoflop_exponents(iso: dict[str, Any]) -> list[str]:
    """The lines giving approach 2's exponents and tokens per parameter, when it has them."""
    if "a" not in iso:
        return []
    tpp = ", ".join(f"{_ci(p['value'], p['ci'])} at C={p['budget']:.2g}" for p in iso["tokens_per_parameter"])
    return [
        "",
        f"N_opt ~ C^a with a = {_ci(iso['a'], iso['a_ci'])}; D_opt ~ C^b with b = {_ci(iso['b'], iso['b_ci'])} "
        "(residual bootstrap within each slice).",
        f"Tokens per parameter at the optimum: {tpp}.",
    ]


def run(plan: ScalingPlan) -> StageResult:
    s = plan.scaling
    reports = Path(s.reports_dir)
    table = read_json(reports / "cells.json", "the scaling_sweep stage's table")
    fit = fit_sweep(table["cells"], s, table.get("baseline"))
    write_json(reports / "fit.json", fit)
    metrics = flat_metrics(fit)
    write_json(reports / "metrics.json", metrics)
    write_text(reports / "law.md", report(fit, s))
    return StageResult(metrics, [str(reports / n) for n in ("fit.json", "law.md", "metrics.json")])
