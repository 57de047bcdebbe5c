"""The findings' own figures, for claims whose stage draws none: intervals (a forest plot) and bars."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmforge.figures import save_figure  # noqa: E402


def forest(
    intervals: Mapping[str, object],  # label -> rules.Interval
    scale: float,
    unit: str,
    out: Path,
    title: str,
    reference: float | None = None,
) -> Path:
    """Each interval as a point and a bar, zero (and `reference`, e.g. a margin) as dotted lines."""
    labels = list(intervals)
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(labels) + 1.2), dpi=100)
    for y, label in enumerate(labels):
        d = intervals[label]
        low = d.low if d.low is not None else d.mean
        high = d.high if d.high is not None else d.mean
        ax.errorbar(
            [scale * d.mean],
            [y],
            xerr=[[scale * (d.mean - low)], [scale * (high - d.mean)]],
            fmt="o",
            capsize=4,
            color="tab:blue" if d.low is not None else "tab:grey",
        )
    ax.axvline(0, color="black", linestyle=":", linewidth=1)
    if reference is not None:
        ax.axvline(scale * reference, color="tab:red", linestyle=":", linewidth=1, label="margin")
        ax.legend(fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    return save_figure(fig, out)


def bars(values: Mapping[str, float], ylabel: str, out: Path, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
    ax.bar(list(values), list(values.values()), color="tab:blue")
    for x, v in enumerate(values.values()):
        ax.annotate(f"{v:.3g}", (x, v), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    return save_figure(fig, out)
