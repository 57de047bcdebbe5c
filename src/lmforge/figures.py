"""Writing a matplotlib figure as PNG, atomically (the Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmforge.io import atomic_path  # noqa: E402


def save_figure(fig, out: Path) -> Path:
    """Save `fig` to `out` (temp file, then rename), close it, and return `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", bbox_inches="tight")
    plt.close(fig)
    return out
