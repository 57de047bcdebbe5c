"""The LightningDataModule of pretraining: encoded splits -> the dataset and collator of an objective.

clm              PackedDataset(block=seq_len, EOS between documents)        CausalLMCollator
mlm + nsp        SentencePairDataset([CLS] A [SEP] B [SEP], 50% real next)  MLMCollator
mlm, no nsp      PackedDataset([CLS] ... [SEP], RoBERTa full sentences)     MLMCollator
span_corruption  PackedDataset(raw block sized so inputs fit seq_len)       SpanCorruptionCollator

Training visits go through `Draws` (static: `dupe_factor` fixed copies; dynamic: a new draw per
epoch) and a `VisitSampler` sharded by rank; evaluation splits are visited once, in order, with
draw 0, so every validation sees the same masks and spans. The training loader is stateful: its
position within the epoch goes into every checkpoint and comes back on resume (Lightning calls
`state_dict` / `load_state_dict` on loaders that have them). Loaders own their random generators,
so creating one never consumes the global RNG that dropout draws from.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from lmforge.data.datasets import Draws, PackedDataset, SentencePairDataset
from lmforge.data.encoded import EncodedSplit
from lmforge.data.sampling import VisitSampler
from lmforge.errors import ConfigError
from lmforge.objectives import CausalLMCollator, MLMCollator, SpanCorruptionCollator, noise_span_counts
from lmforge.tokenizer.specials import SpecialTokens
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, TrainConfig


def raw_length_for(seq_len: int, noise_density: float, mean_span_length: float) -> int:
    """Longest raw block whose span-corrupted input (kept tokens + one sentinel per span + EOS) fits seq_len."""
    length = seq_len
    while True:
        n_noise, n_spans = noise_span_counts(length + 1, noise_density, mean_span_length)
        if length + 1 - n_noise + n_spans + 1 > seq_len:
            return length
        length += 1


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
        self.collate = self._collator()
        self.datasets: dict[str, Dataset] = {}

    def _collator(self):
        o, s = self.objective, self.specials
        if o.kind is ObjectiveKind.clm:
            return CausalLMCollator(s.pad)
        if o.kind is ObjectiveKind.mlm:
            if s.mask is None or s.cls is None:
                raise ConfigError(
                    "objective.kind: got mlm with a tokenizer without [MASK]/[CLS], expected wordpiece"
                )
            specials = [s.pad, s.unk, s.cls, s.sep, s.mask, *s.sentinels]
            return MLMCollator(s.pad, s.mask, self.vocab_size, specials, o.mlm_probability, seed=self.seed)
        if not s.sentinels:
            raise ConfigError("objective.kind: got span_corruption with a tokenizer without sentinels")
        return SpanCorruptionCollator(
            list(s.sentinels),
            s.eos,
            s.pad,
            noise_density=o.noise_density,
            mean_span_length=o.mean_span_length,
            seed=self.seed,
        )

    def dataset(self, split: str) -> Dataset:
        """The split's examples; training visits them through `Draws`, evaluation as they are."""
        if split not in self.datasets:
            self.datasets[split] = self._build(EncodedSplit(self.encoded_dir, split))
        return self.datasets[split]

    def _build(self, split: EncodedSplit) -> Dataset:
        o, s, seq_len = self.objective, self.specials, self.train.seq_len
        if o.kind is ObjectiveKind.clm:
            return PackedDataset(split, seq_len, eos_id=s.eos)
        if o.kind is ObjectiveKind.mlm and o.nsp:
            return SentencePairDataset(split, seq_len, s.cls, s.sep, nsp=True, seed=self.seed)
        if o.kind is ObjectiveKind.mlm:
            return PackedDataset(split, seq_len, eos_id=s.sep, cls_id=s.cls, sep_id=s.sep)
        raw = raw_length_for(seq_len, o.noise_density, o.mean_span_length)
        return PackedDataset(split, raw, eos_id=s.eos)

    def _rank_world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def loader(self, split: str, shuffle: bool = False) -> DataLoader:
        """Training visits (shuffled, resumable) when `shuffle`, else every example once, in order."""
        rank, world = self._rank_world()
        dataset = self.dataset(split)
        kwargs: dict[str, Any] = dict(
            batch_size=self.train.batch_size,
            collate_fn=self.collate,
            num_workers=self.train.num_workers,
            persistent_workers=self.train.num_workers > 0,
            generator=torch.Generator().manual_seed(self.seed),  # keeps the global RNG untouched
        )
        if not shuffle:
            sampler = VisitSampler(len(dataset), shuffle=False, rank=rank, world=world)
            return DataLoader(dataset, sampler=sampler, **kwargs)
        o = self.objective
        dynamic = o.dynamic_masking or o.kind is ObjectiveKind.clm
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
        return self.loader("val")

    def test_dataloader(self) -> DataLoader:
        return self.loader("test")
