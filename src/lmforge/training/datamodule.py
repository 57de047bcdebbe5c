"""The LightningDataModule of pretraining: encoded splits -> the examples and collator of an objective
(its `ObjectiveSpec` in `lmforge.training.objectives`).

Training visits go through `Draws` (static: `dupe_factor` fixed copies; dynamic: a new draw per
epoch) and a `VisitSampler` sharded by rank; evaluation splits are visited once, in order, with
draw 0, so every validation sees the same masks and spans (MLM at `objective.eval_mlm_probability`);
a split of more than `train.eval_windows` examples is scored on that many, evenly spaced, the same
ones every time (`spread`), so validation costs the same whatever the corpus. The training loader is
stateful: its position within the epoch goes into every checkpoint and comes back on resume
(Lightning calls `state_dict` / `load_state_dict` on loaders that have them). Loaders own their
random generators, so creating one never consumes the global RNG that dropout draws from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Subset

from lmforge.data.datasets import Draws
from lmforge.data.encoded import EncodedSplit
from lmforge.data.sampling import VisitSampler, spread
from lmforge.tokenizer.specials import SpecialTokens
from lmforge.training.config import BlockStart, ObjectiveConfig, TrainConfig
from lmforge.training.objectives import OBJECTIVES


class ResumableLoader(DataLoader):
    """A DataLoader over a `VisitSampler` whose checkpointed state is its position in the epoch.

    `consumed_batches()` reports how many batches training has finished in the current epoch (the
    sampler itself runs ahead by the prefetched batches, so it cannot know).
    """

    def __init__(self, *args: Any, consumed_batches: Callable[[], int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.consumed_batches = consumed_batches

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.sampler.epoch, "consumed": self.consumed_batches() * int(self.batch_size)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.sampler.resume(state["epoch"], state["consumed"])


class PretrainDataModule(L.LightningDataModule):
    def __init__(
        self,
        encoded_dir: str,
        objective: ObjectiveConfig,
        train: TrainConfig,
        specials: SpecialTokens,
        vocab_size: int,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.encoded_dir = Path(encoded_dir)
        self.objective, self.train, self.specials = objective, train, specials
        self.vocab_size, self.seed = vocab_size, seed
        self.spec = OBJECTIVES[objective.kind]
        self.collate = self.spec.collator(objective, specials, vocab_size, seed)
        # evaluation visits mask at the fixed evaluation rate (the same collator when the rates agree)
        scored = replace(objective, mlm_probability=objective.eval_mlm_probability)
        self.eval_collate = self.spec.collator(scored, specials, vocab_size, seed)
        self.datasets: dict[str, Dataset] = {}

    def dataset(self, split: str) -> Dataset:
        """The split's examples; training visits them through `Draws`, evaluation as they are."""
        if split not in self.datasets:
            encoded = EncodedSplit(self.encoded_dir, split)
            o, s = self.objective, self.specials
            if split != "train":  # evaluation scores the same contiguous windows whatever training's blocks
                o = replace(o, block_start=BlockStart.any)
            self.datasets[split] = self.spec.examples(encoded, o, s, self.train.seq_len, self.seed)
        return self.datasets[split]

    def _rank_world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def loader(self, split: str, shuffle: bool = False, windows: int | None = None) -> DataLoader:
        """Training visits (shuffled, resumable) when `shuffle`, else every example once, in order
        (at most `windows` of them, evenly spaced across the split: `spread`)."""
        rank, world = self._rank_world()
        dataset = self.dataset(split)
        kwargs: dict[str, Any] = dict(
            batch_size=self.train.batch_size,
            collate_fn=self.collate if shuffle else self.eval_collate,
            num_workers=self.train.num_workers,
            persistent_workers=self.train.num_workers > 0,
            generator=torch.Generator().manual_seed(self.seed),  # keeps the global RNG untouched
        )
        if not shuffle:
            if windows is not None and len(dataset) > windows:  # type: ignore[arg-type]
                dataset = Subset(dataset, spread(len(dataset), windows))  # type: ignore[arg-type]
            sampler = VisitSampler(len(dataset), shuffle=False, rank=rank, world=world)
            return DataLoader(dataset, sampler=sampler, **kwargs)
        o = self.objective
        dynamic = o.dynamic_masking or self.spec.always_dynamic
        visits = Draws(dataset, copies=1 if dynamic else o.dupe_factor, dynamic=dynamic)
        sampler = VisitSampler(len(visits), seed=self.seed, shuffle=True, rank=rank, world=world)
        return ResumableLoader(
            visits, sampler=sampler, drop_last=True, consumed_batches=self._consumed_batches, **kwargs
        )

    def _consumed_batches(self) -> int:
        return int(self.trainer.fit_loop.epoch_loop.batch_progress.current.processed)

    def train_dataloader(self) -> DataLoader:
        return self.loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader("val", windows=self.train.eval_windows)

    def test_dataloader(self) -> DataLoader:
        return self.loader("test", windows=self.train.eval_windows)
