"""The LightningDataModule of pretraining: encoded splits -> the dataset and collator of an objective.

clm              PackedDataset(block=seq_len, EOS between documents)        CausalLMCollator
mlm + nsp        SentencePairDataset([CLS] A [SEP] B [SEP], 50% real next)  MLMCollator (static/dynamic)
mlm, no nsp      PackedDataset([CLS] ... [SEP], RoBERTa full sentences)     MLMCollator
span_corruption  PackedDataset(raw block sized so inputs fit seq_len)       SpanCorruptionCollator
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
from torch.utils.data import DataLoader, Dataset

from lmforge.data.datasets import PackedDataset, SentencePairDataset
from lmforge.data.encoded import EncodedSplit
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
        self.collate = self._collator(dynamic=objective.dynamic_masking)
        self.eval_collate = self._collator(dynamic=False)  # the same masks/spans at every evaluation
        self.datasets: dict[str, Dataset] = {}

    def _collator(self, dynamic: bool):
        o, s = self.objective, self.specials
        if o.kind is ObjectiveKind.clm:
            return CausalLMCollator(s.pad)
        if o.kind is ObjectiveKind.mlm:
            if s.mask is None or s.cls is None:
                raise ConfigError(
                    "objective.kind: got mlm with a tokenizer without [MASK]/[CLS], expected wordpiece"
                )
            specials = [s.pad, s.unk, s.cls, s.sep, s.mask, *s.sentinels]
            return MLMCollator(
                s.pad, s.mask, self.vocab_size, specials, o.mlm_probability, dynamic, self.seed
            )
        if not s.sentinels:
            raise ConfigError("objective.kind: got span_corruption with a tokenizer without sentinels")
        return SpanCorruptionCollator(
            list(s.sentinels),
            s.eos,
            s.pad,
            noise_density=o.noise_density,
            mean_span_length=o.mean_span_length,
            dynamic=dynamic,
            seed=self.seed,
        )

    def dataset(self, split: str) -> Dataset:
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

    def loader(self, split: str, shuffle: bool = False) -> DataLoader:
        return DataLoader(
            self.dataset(split),
            batch_size=self.train.batch_size,
            shuffle=shuffle,
            collate_fn=self.collate if shuffle else self.eval_collate,
            num_workers=self.train.num_workers,
            persistent_workers=self.train.num_workers > 0,
            drop_last=shuffle,
        )

    def train_dataloader(self) -> DataLoader:
        return self.loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader("val")

    def test_dataloader(self) -> DataLoader:
        return self.loader("test")
