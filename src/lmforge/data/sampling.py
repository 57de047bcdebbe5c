"""Samplers that shard a split across processes, shuffle each epoch reproducibly and resume mid-epoch.

`VisitSampler(shuffle=True)` drives training. Epoch e visits a permutation seeded by (seed, e); with
W processes, rank r takes every W-th element starting at r, so one optimizer step of W processes
with batch B consumes exactly the B·W examples that one process with batch B·W would (the tail that
does not divide by W is dropped). It yields `(epoch, index)` visits: the epoch travels with every
index into DataLoader workers, persistent ones included, where `Draws` turns it into the draw that
seeds the example's corruption. `resume(epoch, consumed)` restarts an epoch after its first
`consumed` visits, so an interrupted run continues on exactly the data it would have seen.

`VisitSampler(shuffle=False)` serves evaluation: indices in order, rank r taking r, r + W, ...,
every example exactly once across processes (sums over the split are exact after a reduction).
`spread(n, limit)` picks the fixed, evenly spaced examples that evaluation scores of a large split.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

from lmforge.objectives.rng import mix_seed


class VisitSampler(Sampler):
    def __init__(self, n: int, seed: int = 0, shuffle: bool = True, rank: int = 0, world: int = 1) -> None:
        if not 0 <= rank < world:
            raise ValueError(f"rank={rank}: expected 0 <= rank < world={world}")
        self.n, self.seed, self.shuffle, self.rank, self.world = n, seed, shuffle, rank, world
        self.epoch = 0  # the epoch being visited
        self.start = 0  # visits of this epoch already consumed on this rank (set by resume)

    def set_epoch(self, epoch: int) -> None:
        """Lightning calls this before every epoch; a new epoch starts from its first visit."""
        if epoch != self.epoch:
            self.epoch, self.start = epoch, 0

    def resume(self, epoch: int, consumed: int) -> None:
        self.epoch, self.start = int(epoch), int(consumed)

    def _order(self, epoch: int) -> torch.Tensor:
        if not self.shuffle:
            return torch.arange(self.rank, self.n, self.world)
        generator = torch.Generator().manual_seed(mix_seed(self.seed, epoch))
        usable = self.n - self.n % self.world  # every rank gets the same number of visits
        return torch.randperm(self.n, generator=generator)[:usable][self.rank :: self.world]

    def __len__(self) -> int:
        if not self.shuffle:
            return len(range(self.rank, self.n, self.world))
        return self.n // self.world

    def __iter__(self) -> Iterator[tuple[int, int] | int]:
        epoch, start = self.epoch, self.start
        for chunk in self._order(epoch)[start:].split(CHUNK):  # Python ints for a chunk at a time
            for index in chunk.tolist():
                yield (epoch, index) if self.shuffle else index


CHUNK = 1 << 16


def spread(n: int, limit: int | None) -> list[int]:
    """`limit` indices of range(n) evenly spaced from the first (all of them when n <= limit or no limit)."""
    if limit is None or n <= limit:
        return list(range(n))
    return [i * n // limit for i in range(limit)]
