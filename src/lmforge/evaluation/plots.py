"""Loss curves as PNG (for MLflow and the README); DVC draws its own from the CSVs.

Like is plotted with like: the first panel holds the per-token loss of the predicted targets on
train and validation (`train_loss`, `val_loss`: the same unsmoothed quantity, MLM alone for BERT);
when the run has next-sentence prediction, a second panel holds the NSP losses.
"""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmforge.io import atomic_path  # noqa: E402


def _read(path: Path) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]


def _series(rows: list[dict[str, float]], column: str) -> tuple[list[float], list[float]]:
    points = [(row["step"], row[column]) for row in rows if column in row]
    return [p[0] for p in points], [p[1] for p in points]


def loss_curves(train_csv: Path, val_csv: Path, out: Path, title: str, baseline: float | None = None) -> Path:
    train, val = _read(train_csv), _read(val_csv)
    has_nsp = any("val_nsp_loss" in row for row in val) or any("train_nsp_loss" in row for row in train)
    fig, axes = plt.subplots(
        1, 2 if has_nsp else 1, figsize=(11 if has_nsp else 6, 4), dpi=100, squeeze=False
    )
    panels = [(axes[0][0], "loss", "loss (nats per predicted token)")]
    if has_nsp:
        panels.append((axes[0][1], "nsp_loss", "next-sentence prediction loss (nats per pair)"))
    for ax, column, ylabel in panels:
        for rows, split, marker in ((train, "train", None), (val, "validation", "o")):
            steps, values = _series(rows, f"{'train' if split == 'train' else 'val'}_{column}")
            if steps:
                ax.plot(steps, values, label=split, marker=marker)
        ax.set(xlabel="optimizer step", ylabel=ylabel)
    if baseline is not None:
        axes[0][0].axhline(baseline, color="grey", linestyle="--", label="unigram baseline")
    axes[0][0].set_title(title)
    for ax, _, _ in panels:
        ax.legend()
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return out
