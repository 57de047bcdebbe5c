"""The `scaling_plots` stage: the sweep's cells and fitted laws as figures (for `dvc plots` and MLflow).

- loss_vs_params.png: held-out loss against N for each token budget D of the grid, with the fitted
  law's curve L(N, D) for that D;
- loss_vs_compute.png: every cell's loss against its training FLOPs, with the compute-optimal
  frontier the law predicts (L at N_opt(C), D_opt(C) with C = 6ND);
- isoflop.png: each IsoFLOP slice's loss against N with its fitted parabola and minimum;
- residuals.png: log(measured / fitted) loss of every cell against its FLOPs, held-out cells marked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from lmforge.errors import DataError
from lmforge.io import atomic_path
from lmforge.scaling.config import ScalingPlan
from lmforge.scaling.law import Law
from lmforge.stage import StageResult

FIGURES = ("loss_vs_params.png", "loss_vs_compute.png", "isoflop.png", "residuals.png")


def read_json(path: Path, expected: str) -> dict[str, Any]:
    if not path.is_file():
        raise DataError(f"{path} does not exist; expected {expected}")
    try:
        return json.loads(path.read_text())
    except ValueError:
        raise DataError(f"{path} is not valid JSON; expected {expected}") from None


def as_law(values: dict[str, float]) -> Law:
    return Law(**{k: values[k] for k in ("E", "A", "B", "alpha", "beta")})


def law_predict(law: dict[str, float], n: np.ndarray, d: np.ndarray) -> np.ndarray:
    return as_law(law).predict(n, d)


def run(plan: ScalingPlan) -> StageResult:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scaling = plan.scaling
    reports = Path(scaling.reports_dir)
    rows = read_json(reports / "cells.json", "the scaling_sweep stage's table")["cells"]
    fit = read_json(reports / "fit.json", "the scaling_fit stage's results")
    law, key = fit["law"], f"params_{fit['params']}"
    n = np.array([r[key] for r in rows], dtype=float)
    d = np.array([r["tokens"] for r in rows], dtype=float)
    loss = np.array([r["val_loss"] for r in rows], dtype=float)
    flops = np.array([r["flops"] for r in rows], dtype=float)
    grid = np.array([r["kind"] == "grid" for r in rows])
    flat = np.array([bool(r.get("plateau", False)) for r in rows])  # left out of the fit
    label_n = "non-embedding parameters N" if fit["params"] == "non_embedding" else "parameters N"
    figures = reports / "figures"
    written = []

    def save(fig, name: str) -> None:
        with atomic_path(figures / name) as tmp:
            fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(str(figures / name))

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    budgets = sorted(set(d[grid]))
    colors = plt.cm.viridis(np.linspace(0, 0.9, max(len(budgets), 1)))
    span = np.geomspace(n.min() * 0.8, n.max() * 1.25, 100)
    for color, tokens in zip(colors, budgets):
        pick = grid & (d == tokens)
        ax.scatter(n[pick & ~flat], loss[pick & ~flat], color=color, label=f"D = {tokens:,.0f}")
        ax.scatter(n[pick & flat], loss[pick & flat], facecolors="none", edgecolors=color)
        if law is not None:
            ax.plot(span, law_predict(law, span, np.full_like(span, tokens)), color=color, lw=1)
    if flat.any():
        ax.scatter([], [], facecolors="none", edgecolors="grey", label="unigram plateau (not fitted)")
    ax.set(
        xscale="log",
        xlabel=label_n,
        ylabel="held-out loss (nats/token)",
        title="Loss vs N per D, fitted law" if law is not None else "Loss vs N per D (no law fitted)",
    )
    ax.legend(fontsize=8)
    save(fig, FIGURES[0])

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    points = ax.scatter(flops[~flat], loss[~flat], c=np.log10(n[~flat]), cmap="viridis", s=18)
    fig.colorbar(points, ax=ax, label=f"log10 {label_n}")
    if flat.any():
        ax.scatter(
            flops[flat], loss[flat], facecolors="none", edgecolors="grey", s=18, label="unigram plateau"
        )
    if fit.get("derived") is not None:  # only a law that identifies E, alpha and beta has a frontier
        c = np.geomspace(flops.min() * 0.8, flops.max() * 1.25, 100)
        n_opt, d_opt = as_law(law).optimal(c)  # the law's allocation under C = 6ND
        ax.plot(
            c,
            law_predict(law, n_opt, d_opt),
            color="black",
            lw=1.2,
            label="law's compute-optimal frontier (C = 6ND)",
        )
    ax.set(xscale="log", xlabel="training FLOPs (counted from shapes)", ylabel="held-out loss (nats/token)")
    ax.set_title("Loss vs compute")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    save(fig, FIGURES[1])

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    slices = fit.get("isoflop", {}).get("slices", [])
    colors = plt.cm.plasma(np.linspace(0, 0.85, max(len(slices), 1)))
    for color, piece in zip(colors, slices):
        pick = np.array([r.get("budget") == piece["budget"] for r in rows]) & ~flat
        label = f"C = {piece['budget']:.2g}" + ("" if piece["inside"] else " (does not straddle its optimum)")
        ax.scatter(n[pick], loss[pick], color=color, label=label)
        x = np.linspace(np.log(n[pick].min()) - 0.2, np.log(n[pick].max()) + 0.2, 100)
        ax.plot(np.exp(x), np.polyval(piece["coeffs"], x), color=color, lw=1)
        ax.scatter(  # the vertex: filled when the slice straddles it, hollow when it is not a minimum found
            [piece["n_opt"]],
            [piece["loss_opt"]],
            color=color if piece["inside"] else "none",
            marker="*",
            s=140,
            edgecolor="black",
        )
    ax.set(
        xscale="log",
        xlabel=label_n,
        ylabel="held-out loss (nats/token)",
        title="IsoFLOP slices and their minima",
    )
    if slices:
        ax.legend(fontsize=8)
    save(fig, FIGURES[2])

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    if law is None:  # too few cells left the plateau for a law (law.md says so): nothing to compare with
        ax.text(0.5, 0.5, "no law fitted", ha="center", va="center", transform=ax.transAxes)
        ax.set(title="Residuals of the law")
        save(fig, FIGURES[3])
        return StageResult({"figures": len(written)}, written)
    residual = np.log(loss / law_predict(law, n, d))
    held = np.array([r["name"] in set(fit.get("holdout", {}).get("cells", [])) for r in rows])
    ax.axhline(0, color="grey", lw=0.8)
    ax.scatter(flops[~held & ~flat], residual[~held & ~flat], s=18, label="fitted cells")
    if flat.any():
        ax.scatter(
            flops[flat],
            residual[flat],
            s=18,
            facecolors="none",
            edgecolors="grey",
            label="plateau (not fitted)",
        )
    if held.any():
        ax.scatter(flops[held], residual[held], s=30, marker="x", color="red", label="held out (predicted)")
    ax.set(
        xscale="log",
        xlabel="training FLOPs",
        ylabel="log(measured / fitted loss)",
        title="Residuals of the law",
    )
    ax.legend(fontsize=8)
    save(fig, FIGURES[3])
    return StageResult({"figures": len(written)}, written)
