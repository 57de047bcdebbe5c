"""Per-example random generators for static and dynamic corruption of training examples.

BERT (Devlin et al. 2018) masks each example once, when the training data is written, so an example
carries the same mask every epoch. RoBERTa (Liu et al. 2019, section 4.1) draws a fresh mask every
time an example is fed to the model. `ExampleRNG` offers both behind one call:

- static: the generator for an example is seeded from `(seed, index)` alone, so the corruption is a
  pure function of the example's position in the dataset, independent of batch composition, worker
  count or epoch;
- dynamic: one generator per process, seeded lazily from `(seed, torch.initial_seed())`. The
  DataLoader seeds every worker with `base_seed + worker_id` and draws a new `base_seed` for every
  epoch, so workers never share a stream and a new epoch gets new masks; with `num_workers=0` the
  main-process generator simply keeps advancing. Runs seeded with `lightning.seed_everything` are
  reproducible; resuming mid-epoch does not replay the exact dynamic masks.
"""

from __future__ import annotations

import os

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
    """Hands out the `torch.Generator` that corrupts one example; picklable for DataLoader workers."""

    def __init__(self, seed: int, dynamic: bool) -> None:
        self.seed = int(seed)
        self.dynamic = bool(dynamic)
        self._generator: torch.Generator | None = None  # dynamic only: this process's stream
        self._pid: int | None = None  # process that seeded `_generator` (forked workers must reseed)

    def generator(self, index: int | None) -> torch.Generator:
        """The generator for example `index`: fresh and deterministic if static, shared if dynamic."""
        if not self.dynamic:
            if index is None:
                raise ConfigError("index=None: static corruption needs each example's dataset index (an int)")
            return torch.Generator().manual_seed(mix_seed(self.seed, int(index)))
        if self._generator is None or self._pid != os.getpid():
            self._generator = torch.Generator().manual_seed(mix_seed(self.seed, torch.initial_seed()))
            self._pid = os.getpid()
        return self._generator

    def __getstate__(self) -> dict:
        # A generator's stream must not be copied into another process: each one reseeds itself.
        return {"seed": self.seed, "dynamic": self.dynamic, "_generator": None, "_pid": None}

    def __repr__(self) -> str:
        return f"ExampleRNG(seed={self.seed}, dynamic={self.dynamic})"
