"""The architecture experiments' figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from lmforge.figures import save_figure  # noqa: E402


def positions_figure(
    curves: Mapping[str, torch.Tensor], labels: Mapping[str, str], train_length: int, out: Path
) -> Path:
    """Loss by position in the longest test windows, a line per position scheme (20-token means)."""
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for name, curve in curves.items():
        width = 20
        n = len(curve) // width * width
        smoothed = curve[:n].reshape(-1, width).mean(1)
        ax.plot(
            [width * (i + 0.5) for i in range(len(smoothed))],
            smoothed.numpy(),
            label=labels[name],
            marker=".",
        )
    ax.axvline(train_length, color="grey", linestyle=":", label=f"training length ({train_length})")
    ax.set(xlabel="position in the window", ylabel="next-token loss (nats, 20-token means)")
    ax.set_ylim(top=min(ax.get_ylim()[1], 12))
    ax.set_title("Loss past the training length")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, out)


def kv_figure(rows: Sequence[Mapping], out: Path) -> Path:
    """KV-cache bytes per token and test loss against the number of KV heads."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5), dpi=100)
    labels = [f"{r['n_heads']}/{r['n_kv_heads']}" for r in rows]
    left.bar(labels, [r["kv_bytes_per_token"] for r in rows], color="tab:blue")
    left.set(xlabel="query heads / KV heads", ylabel="KV cache bytes per token", title="KV cache")
    diffs = [r["test_loss_minus_reference"] for r in rows]
    means = [d["mean"] for d in diffs]
    errors = [
        [m - (d["low"] if d["low"] is not None else m) for m, d in zip(means, diffs)],
        [(d["high"] if d["high"] is not None else m) - m for m, d in zip(means, diffs)],
    ]
    right.errorbar(labels, means, yerr=errors, fmt="o", capsize=4)
    right.axhline(0, color="grey", linestyle=":")
    right.set(
        xlabel="query heads / KV heads", ylabel="test loss minus MHA (nats)", title="Loss cost (95% interval)"
    )
    for ax in (left, right):
        ax.grid(alpha=0.3)
    return save_figure(fig, out)
