"""VisitSampler: reproducible shuffles per epoch, rank shards that partition the global batch, exact
mid-epoch resume; with the collators, two processes never draw the same corruption."""

from __future__ import annotations

import torch

from lmforge.data.sampling import VisitSampler
from lmforge.objectives import MLMCollator


def test_each_epoch_is_a_reproducible_permutation():
    a, b = VisitSampler(50, seed=3), VisitSampler(50, seed=3)
    first = list(a)
    assert first == list(b) and sorted(i for _, i in first) == list(range(50))
    a.set_epoch(1)
    second = list(a)
    assert {e for e, _ in second} == {1} and [i for _, i in second] != [i for _, i in first]


def test_ranks_partition_the_batches_of_one_process():
    single = [i for _, i in VisitSampler(23, seed=1)]
    ranks = [[i for _, i in VisitSampler(23, seed=1, rank=r, world=2)] for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == 11 and not set(ranks[0]) & set(ranks[1])
    batch = 4  # per process; one process would use 8
    for step in range(len(ranks[0]) // batch):
        together = ranks[0][step * batch : (step + 1) * batch] + ranks[1][step * batch : (step + 1) * batch]
        assert sorted(together) == sorted(single[step * 2 * batch : (step + 1) * 2 * batch])


def test_resume_continues_after_the_consumed_visits():
    whole = VisitSampler(40, seed=5)
    whole.set_epoch(2)
    expected = list(whole)
    resumed = VisitSampler(40, seed=5)
    resumed.resume(2, 12)
    resumed.set_epoch(2)  # Lightning sets the same epoch again: the position is kept
    assert list(resumed) == expected[12:]
    resumed.set_epoch(3)
    assert len(list(resumed)) == 40  # the next epoch is whole


def test_evaluation_order_covers_every_example_once_across_ranks():
    parts = [list(VisitSampler(11, shuffle=False, rank=r, world=3)) for r in range(3)]
    assert sorted(sum(parts, [])) == list(range(11)) and parts[0] == [0, 3, 6, 9]


def test_two_processes_draw_different_masks():
    """Under DDP each rank corrupts the examples of its shard, keyed by the example: no two ranks
    (and no two epochs of dynamic masking) repeat a mask pattern."""
    collate = MLMCollator(0, 4, 100, [0, 1, 2, 3, 4], mlm_probability=0.3, seed=7)
    text = torch.arange(10, 74)

    def masks(rank: int, epoch: int) -> torch.Tensor:
        sampler = VisitSampler(16, seed=7, rank=rank, world=2)
        sampler.set_epoch(epoch)
        items = [{"input_ids": text, "index": i, "draw": e} for e, i in list(sampler)[:4]]
        return collate(items)["labels"] != -100

    assert not torch.equal(masks(0, 0), masks(1, 0))
    assert not torch.equal(masks(0, 0), masks(0, 1))
    assert torch.equal(masks(1, 0), masks(1, 0))


def test_the_epoch_reaches_persistent_workers():
    """Workers keep their copy of the dataset across epochs; the epoch travels with each index, so
    dynamic masks still change every epoch (and repeat exactly for the same epoch)."""
    from torch.utils.data import DataLoader

    from lmforge.data.datasets import Draws

    base = [{"input_ids": torch.arange(10, 74)} for _ in range(8)]
    sampler = VisitSampler(8, seed=1)
    loader = DataLoader(
        Draws(base, dynamic=True),
        batch_size=4,
        sampler=sampler,
        collate_fn=MLMCollator(0, 4, 100, [0, 1, 2, 3, 4], mlm_probability=0.3, seed=1),
        num_workers=1,
        persistent_workers=True,
    )
    epochs = []
    for epoch in (0, 1, 0):
        sampler.set_epoch(epoch)
        epochs.append(torch.cat([batch["labels"] for batch in loader]))
    assert not torch.equal(epochs[0], epochs[1]) and torch.equal(epochs[0], epochs[2])


def test_spread_picks_fixed_evenly_spaced_examples():
    from lmforge.data.sampling import spread

    assert spread(5, None) == spread(5, 5) == spread(5, 9) == [0, 1, 2, 3, 4]
    assert spread(10, 4) == [0, 2, 5, 7]
    picked = spread(1_000_003, 2048)
    assert len(picked) == len(set(picked)) == 2048 and picked == sorted(picked)
    gaps = [b - a for a, b in zip(picked, picked[1:])]
    assert max(gaps) - min(gaps) <= 1  # evenly spaced across the whole split, not its head
    assert picked[-1] >= 1_000_003 - 489


def test_iteration_in_chunks_yields_the_whole_permutation(monkeypatch):
    """The epoch's order becomes Python ints a chunk at a time; the visits are the same."""
    import lmforge.data.sampling as sampling

    whole = list(VisitSampler(1000, seed=4))
    monkeypatch.setattr(sampling, "CHUNK", 7)
    chunked = VisitSampler(1000, seed=4)
    assert list(chunked) == whole
    chunked.resume(0, 333)
    assert list(chunked) == whole[333:]
