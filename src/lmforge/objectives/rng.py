"""Per-example random generators: every corruption is a pure function of (seed, draw, example).

BERT (Devlin et al. 2018) masks each training instance once, when the training data is written,
duplicating every sequence `dupe_factor` times with different masks; RoBERTa (Liu et al. 2019,
section 4.1) draws a fresh mask every time a sequence is fed to the model. Both are one rule here:
the generator of an example is seeded from `(seed, draw, index)`, where `draw` is the instance's
copy number for static corruption and the epoch for dynamic corruption (see
`lmforge.data.datasets.Draws`). No generator state flows between examples, so the corruption of
an example does not depend on batch composition, worker count, process rank or where a run was
resumed: an interrupted and resumed run sees exactly the masks of an uninterrupted one, and two
DDP processes, which visit different examples, draw different masks.
"""

from __future__ import annotations

import torch

from lmforge.errors import ConfigError

_MASK64 = (1 << 64) - 1


def mix_seed(*values: int) -> int:
    """Hash integers into one 63-bit seed (splitmix64 finaliser), so nearby inputs give unrelated streams."""
    x = 0x9E3779B97F4A7C15
    for value in values:
        x = (x ^ (value & _MASK64)) & _MASK64
        x = (x + 0x9E3779B97F4A7C15) & _MASK64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
        x = x ^ (x >> 31)
    return x >> 1  # torch.Generator.manual_seed accepts it on every platform


class ExampleRNG:
    """Hands out the `torch.Generator` that corrupts one example; plain data, so picklable."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)

    def generator(self, index: int | None, draw: int = 0) -> torch.Generator:
        """A fresh generator for visit `draw` of example `index`."""
        if index is None:
            raise ConfigError("index=None: corruption needs each example's dataset index (an int)")
        return torch.Generator().manual_seed(mix_seed(self.seed, int(draw), int(index)))

    def __repr__(self) -> str:
        return f"ExampleRNG(seed={self.seed})"
