"""Loss curves as PNG (for MLflow and the README); DVC draws its own from the CSVs."""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmforge.io import atomic_path  # noqa: E402


def _read(path: Path) -> tuple[list[float], list[float]]:
    if not path.is_file():
        return [], []
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    return [float(r[0]) for r in rows], [float(r[1]) for r in rows]


def loss_curves(train_csv: Path, val_csv: Path, out: Path, title: str, baseline: float | None = None) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for path, label in ((train_csv, "train"), (val_csv, "validation")):
        steps, values = _read(path)
        if steps:
            ax.plot(steps, values, label=label, marker="o" if label == "validation" else None)
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle="--", label="unigram baseline")
    ax.set(xlabel="optimizer step", ylabel="loss (nats per target token)", title=title)
    ax.legend()
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return out
