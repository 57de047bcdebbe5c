"""The interpret stage's figures: attention maps, the logit lens, induction and in-context learning."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from lmforge.figures import save_figure  # noqa: E402


def attention_figure(maps: torch.Tensor, tokens: Sequence[str], out: Path, title: str) -> Path:
    """A panel per layer (rows) and head (columns): query tokens down, key tokens across."""
    layers, heads = maps.shape[:2]
    size = max(2.2, 0.16 * len(tokens))
    fig, axes = plt.subplots(layers, heads, figsize=(size * heads, size * layers), dpi=100, squeeze=False)
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer][head]
            ax.imshow(maps[layer, head].numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_title(f"layer {layer + 1} head {head + 1}", fontsize=8)
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
    fig.suptitle(title)
    return save_figure(fig, out)


def lens_figure(
    lens: Mapping[str, Sequence[Mapping[str, float]]], out: Path, reads: str = "the next token"
) -> Path:
    """Loss and top-1 accuracy of each layer's reading (predicting `reads`), a line per checkpoint."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    for name, rows in lens.items():
        layers = [r["layer"] for r in rows]
        left.plot(layers, [r["loss"] for r in rows], marker="o", label=name)
        right.plot(layers, [100 * r["accuracy"] for r in rows], marker="o", label=name)
    left.set(xlabel="layer (0 = embeddings)", ylabel="loss (nats)", title="logit lens: loss")
    right.set(xlabel="layer (0 = embeddings)", ylabel="top-1 accuracy (%)", title="logit lens: accuracy")
    fig.suptitle(f"each layer read through the unembedding, predicting {reads}", fontsize=9)
    left.set_ylim(top=min(left.get_ylim()[1], 15))
    for ax in (left, right):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    return save_figure(fig, out)


def induction_figure(
    steps: Sequence[int],
    scores: Sequence[torch.Tensor],
    by_position: Mapping[str, torch.Tensor],
    threshold: float,
    out: Path,
) -> Path:
    """Left: each head's induction score across the checkpoints. Right: loss by position per checkpoint."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), dpi=100)
    stacked = torch.stack(list(scores))  # (checkpoints, layers, heads)
    for layer in range(stacked.shape[1]):
        for head in range(stacked.shape[2]):
            left.plot(steps, stacked[:, layer, head].numpy(), marker="o", label=f"L{layer + 1}H{head + 1}")
    left.axhline(threshold, color="grey", linestyle=":", label="threshold")
    left.set(
        xlabel="pretraining step", ylabel="induction score", title="induction score per head", ylim=(0, 1)
    )
    left.legend(fontsize=7, ncol=2)
    for name, curve in by_position.items():
        right.plot(range(1, len(curve) + 1), curve.numpy(), label=name, linewidth=1)
    right.set(
        xlabel="tokens of context", ylabel="next-token loss (nats)", title="loss by position (test split)"
    )
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(alpha=0.3)
    return save_figure(fig, out)
