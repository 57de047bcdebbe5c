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
from lmforge.scaling.config import ScalingConfig
from lmforge.scaling.plots import read_json
from lmforge.stage import Plan, StageResult

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
    "compute); one learning rate and batch size serve every size instead of being tuned per size; the "
    "corpus is a ~10M-token mixture with a 1024-token vocabulary, so E and the data term B/D^beta "
    "belong to this data; and 4-6 points per axis leave wide intervals."
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


# The fit's bounds (law.py): E, A, B > 0 in log space, 0 <= alpha, beta <= 3.
AT_BOUND = {"E": lambda v: v < 1e-6, "alpha": lambda v: v <= 1e-6 or v >= 3 - 1e-6}
AT_BOUND["beta"] = AT_BOUND["alpha"]


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


def fit_sweep(rows: list[dict[str, Any]], s: ScalingConfig) -> dict[str, Any]:
    """Both approaches on a sweep's result rows (see the module docstring)."""
    if not rows:
        raise DataError("scaling fit: the sweep's table has no cells; expected the scaling_sweep results")
    x = arrays(rows, s.fit.params.value)
    delta = s.fit.huber_delta
    boot = law.bootstrap(
        x["N"], x["D"], x["L"], n_boot=s.fit.n_boot, seed=s.fit.seed, level=s.fit.level, delta=delta
    )
    fitted = boot.fit
    n_held = max(1, round(s.fit.holdout_fraction * len(rows)))
    held = law.holdout(x["N"], x["D"], x["L"], x["C"], n_holdout=n_held, delta=delta)
    point = boot.estimate
    intervals = {k: [float(v) for v in boot.intervals[k]] for k in PARAMS}
    logs = np.log(boot.samples[:, :5])
    correlations = np.corrcoef(logs.T) if len(logs) > 2 else np.full((5, 5), np.nan)
    result: dict[str, Any] = {
        "params": s.fit.params.value,
        "n_cells": len(rows),
        "law": point,
        "law_ci": intervals,
        "constraint": {k: constraint(k, point[k], *intervals[k]) for k in PARAMS},
        "correlation_log": {
            f"{PARAMS[i]}~{PARAMS[j]}": float(correlations[i, j]) for i in range(5) for j in range(i + 1, 5)
        },
        "at_bound": bool(fitted.at_bound),
        "bootstrap": {"n_boot": s.fit.n_boot, "failed": int(boot.n_failed), "level": s.fit.level},
        "huber_objective": float(fitted.objective),
        "converged_starts": f"{fitted.converged_starts}/{fitted.n_starts}",
        "holdout": {
            "cells": [rows[r["index"]]["name"] for r in held["rows"]],
            "rows": held["rows"],
            "mean_abs_rel_error": float(held["mean_abs_rel_error"]),
        },
        "isoflop": fit_isoflop(x, s),
    }
    budgets = sorted(set(x["budget"][np.isfinite(x["budget"])]))
    result["law_tokens_per_parameter"] = [
        {"budget": float(c), "value": float(fitted.law.tokens_per_parameter(c))} for c in budgets
    ]
    return result


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
            out["excluded"].append(f"C={budget:.3g}: the parabola's minimum lies outside the sampled sizes")
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
    out: dict[str, float] = {}
    for k in PARAMS:
        out[f"law.{k}"] = fit["law"][k]
        out[f"law.{k}_lo"], out[f"law.{k}_hi"] = fit["law_ci"][k]
    out["law.holdout_mean_abs_rel_error"] = fit["holdout"]["mean_abs_rel_error"]
    iso = fit["isoflop"]
    if "a" in iso:
        out["isoflop.a"], out["isoflop.b"] = iso["a"], iso["b"]
        out["isoflop.a_lo"], out["isoflop.a_hi"] = iso["a_ci"]
        out["isoflop.b_lo"], out["isoflop.b_hi"] = iso["b_ci"]
        for p in iso["tokens_per_parameter"]:
            budget = f"{p['budget']:.0e}".replace("+", "")  # MLflow names: letters, digits, _-. /
            out[f"isoflop.tokens_per_param.C{budget}"] = p["value"]
    out["cells"] = fit["n_cells"]
    return out


def _ci(value: float, ci: list[float] | tuple[float, float], digits: int = 3) -> str:
    return f"{value:.{digits}g} [{ci[0]:.{digits}g}, {ci[1]:.{digits}g}]"


def report(fit: dict[str, Any], s: ScalingConfig) -> str:
    level = f"{100 * s.fit.level:.0f}%"
    law_, ci = fit["law"], fit["law_ci"]
    n_name = "non-embedding parameters" if fit["params"] == "non_embedding" else "all parameters"
    lines = [
        f"# Scaling laws of sweep `{s.name}`",
        "",
        f"{fit['n_cells']} cells; N = {n_name}, D = training tokens, L = held-out loss (nats/token); "
        f"intervals are {level} bootstrap percentiles ({fit['bootstrap']['n_boot']} resamples, "
        f"{fit['bootstrap']['failed']} failed).",
        "",
        "## Approach 3: L(N, D) = E + A/N^alpha + B/D^beta",
        "",
        f"| parameter | estimate [{level} CI] | how well the sweep constrains it |",
        "|---|---|---|",
    ]
    for k in PARAMS:
        lines.append(f"| {k} | {_ci(law_[k], ci[k])} | {fit['constraint'][k]} |")
    strong = [f"{k} ({v:+.2f})" for k, v in fit["correlation_log"].items() if abs(v) > 0.8]
    lines += [
        "",
        "a = beta/(alpha+beta) and b = alpha/(alpha+beta) are the law's compute-optimal exponents "
        "(N_opt ~ C^a, D_opt ~ C^b under C = 6ND).",
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
    if "a" in iso:
        lines += [
            "",
            f"N_opt ~ C^a with a = {_ci(iso['a'], iso['a_ci'])}; D_opt ~ C^b with b = {_ci(iso['b'], iso['b_ci'])} "
            "(residual bootstrap within each slice).",
        ]
        tpp = ", ".join(
            f"{_ci(p['value'], p['ci'])} at C={p['budget']:.2g}" for p in iso["tokens_per_parameter"]
        )
        lines.append(f"Tokens per parameter at the optimum: {tpp}.")
    lines += ["", "## Beside the published laws", ""]
    lines += [
        "| source | alpha | beta | a (N_opt ~ C^a) | b (D_opt ~ C^b) | tokens/param | note |",
        "|---|---|---|---|---|---|---|",
    ]
    iso_a = _ci(iso["a"], iso["a_ci"]) if "a" in iso else "n/a"
    iso_b = _ci(iso["b"], iso["b_ci"]) if "b" in iso else "n/a"
    tpp_iso = iso["tokens_per_parameter"][-1] if iso.get("tokens_per_parameter") else None
    lines.append(
        f"| this sweep, approach 3 | {_ci(law_['alpha'], ci['alpha'])} | {_ci(law_['beta'], ci['beta'])} | "
        f"{_ci(law_['a'], ci['a'])} | {_ci(law_['b'], ci['b'])} | | N = {n_name} |"
    )
    lines.append(
        f"| this sweep, approach 2 | | | {iso_a} | {iso_b} | "
        f"{_ci(tpp_iso['value'], tpp_iso['ci']) if tpp_iso else 'n/a'} | "
        f"{'at C=' + format(tpp_iso['budget'], '.2g') if tpp_iso else ''} |"
    )
    for name, alpha, beta, a, b, tpp_pub, note in PUBLISHED:
        cells = [f"{v:.3g}" if v is not None else "" for v in (alpha, beta, a, b, tpp_pub)]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {note} |")
    lines += ["", TINY_SCALE, ""]
    return "\n".join(lines)


def run(plan: Plan) -> StageResult:
    s = plan.scaling
    reports = Path(s.reports_dir)
    rows = read_json(reports / "cells.json", "the scaling_sweep stage's table")["cells"]
    fit = fit_sweep(rows, s)
    write_json(reports / "fit.json", fit)
    metrics = flat_metrics(fit)
    write_json(reports / "metrics.json", metrics)
    write_text(reports / "law.md", report(fit, s))
    return StageResult(metrics, [str(reports / n) for n in ("fit.json", "law.md", "metrics.json")])
