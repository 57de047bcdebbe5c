"""One record per training objective: everything that differs between objectives, in one place.

The datamodule, the LightningModule, the pretrain stage's family check and evaluation's unigram
baseline look an `ObjectiveSpec` up once by `objective.kind` instead of branching on it, so a new
objective is one entry here.

    kind             family           examples                                                collator
    clm              decoder          PackedDataset(block=seq_len, EOS between documents)     CausalLMCollator
    mlm + nsp        encoder          SentencePairDataset([CLS] A [SEP] B [SEP], 50% IsNext)  MLMCollator
    mlm              encoder          PackedDataset([CLS] ... [SEP], RoBERTa full sentences)  MLMCollator
    span_corruption  encoder_decoder  PackedDataset(raw block sized so inputs fit seq_len)    SpanCorruptionCollator
    seq2seq          encoder_decoder  none: parallel pairs, batched by the translate stages  none

The translate stages train `seq2seq` through the same LightningModule; its pairs and token-count
batches come from `lmforge.translate.batches`, so asking the corpus datamodule for them is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import torch
from torch import nn
from torch.utils.data import Dataset

from lmforge.data.datasets import PackedDataset, SentencePairDataset
from lmforge.data.encoded import EncodedSplit
from lmforge.errors import ConfigError
from lmforge.model.config import Family, ModelConfig
from lmforge.objectives import (
    IGNORE_INDEX,
    CausalLMCollator,
    CausalLMObjective,
    MaskedLMObjective,
    MLMCollator,
    Seq2SeqObjective,
    SpanCorruptionCollator,
    SpanCorruptionObjective,
    noise_span_counts,
)
from lmforge.tokenizer.specials import SpecialTokens
from lmforge.training.config import ObjectiveConfig, ObjectiveKind

Batch = dict[str, torch.Tensor]


@dataclass(frozen=True)
class ObjectiveSpec:
    family: Family  # the model family it trains
    examples: Callable[[EncodedSplit, ObjectiveConfig, SpecialTokens, int, int], Dataset]
    # ^ (split, objective, specials, seq_len, seed) -> the split's examples
    collator: Callable[[ObjectiveConfig, SpecialTokens, int, int], Callable[[list], Batch]]
    # ^ (objective, specials, vocab_size, seed) -> corruption + padding of a list of examples
    loss: Callable[[ObjectiveConfig, ModelConfig], nn.Module]  # objective(model, batch) -> (loss, stats)
    targets: Callable[[Batch], torch.Tensor]  # the token ids it predicts in a batch, flattened
    always_dynamic: bool = False  # no corruption to keep fixed: every epoch is simply a new shuffle
    generates: bool = False  # a left-to-right LM: evaluation decodes samples from prompts


def labelled(batch: Batch) -> torch.Tensor:
    labels = batch["labels"]
    return labels[labels != IGNORE_INDEX]


def next_tokens(batch: Batch) -> torch.Tensor:
    labels = batch["labels"][:, 1:]  # position t predicts token t + 1
    return labels[labels != IGNORE_INDEX]


def raw_length_for(seq_len: int, noise_density: float, mean_span_length: float) -> int:
    """Longest raw block whose span-corrupted input (kept tokens + one sentinel per span + EOS) fits seq_len."""
    length = seq_len
    while True:
        n_noise, n_spans = noise_span_counts(length + 1, noise_density, mean_span_length)
        if length + 1 - n_noise + n_spans + 1 > seq_len:
            return length
        length += 1


def mlm_examples(split, o: ObjectiveConfig, s: SpecialTokens, seq_len: int, seed: int) -> Dataset:
    if o.nsp:
        return SentencePairDataset(split, seq_len, s.cls, s.sep, nsp=True, seed=seed)
    return PackedDataset(split, seq_len, eos_id=s.sep, cls_id=s.cls, sep_id=s.sep, start=o.block_start.value)


def mlm_collator(o: ObjectiveConfig, s: SpecialTokens, vocab_size: int, seed: int) -> MLMCollator:
    if s.mask is None or s.cls is None:
        raise ConfigError("objective.kind: got mlm with a tokenizer without [MASK]/[CLS], expected wordpiece")
    specials = [s.pad, s.unk, s.cls, s.sep, s.mask, *s.sentinels]
    return MLMCollator(s.pad, s.mask, vocab_size, specials, o.mlm_probability, seed=seed)


def span_examples(split, o: ObjectiveConfig, s: SpecialTokens, seq_len: int, seed: int) -> Dataset:
    raw = raw_length_for(seq_len, o.noise_density, o.mean_span_length)
    return PackedDataset(split, raw, eos_id=s.eos, start=o.block_start.value)


def span_collator(o: ObjectiveConfig, s: SpecialTokens, vocab_size: int, seed: int) -> SpanCorruptionCollator:
    if not s.sentinels:
        raise ConfigError("objective.kind: got span_corruption with a tokenizer without sentinels")
    return SpanCorruptionCollator(
        list(s.sentinels),
        s.eos,
        s.pad,
        noise_density=o.noise_density,
        mean_span_length=o.mean_span_length,
        seed=seed,
    )


def pairs_only(*_: object) -> NoReturn:
    """A monolingual corpus has no targets for `seq2seq`: it trains on the translate stages' pairs."""
    raise ConfigError(
        "objective.kind: got seq2seq, which trains on parallel pairs (the translate stages); "
        "expected clm, mlm or span_corruption for a corpus"
    )


OBJECTIVES: dict[ObjectiveKind, ObjectiveSpec] = {
    ObjectiveKind.clm: ObjectiveSpec(
        family=Family.decoder,
        examples=lambda split, o, s, seq_len, seed: PackedDataset(
            split, seq_len, eos_id=s.eos, start=o.block_start.value
        ),
        collator=lambda o, s, vocab_size, seed: CausalLMCollator(s.pad),
        loss=lambda o, model: CausalLMObjective(o.label_smoothing, o.loss_chunk),
        targets=next_tokens,
        always_dynamic=True,
        generates=True,
    ),
    ObjectiveKind.mlm: ObjectiveSpec(
        family=Family.encoder,
        examples=mlm_examples,
        collator=mlm_collator,
        loss=lambda o, model: MaskedLMObjective(
            model.d_model, nsp=o.nsp, label_smoothing=o.label_smoothing, loss_chunk=o.loss_chunk
        ),
        targets=labelled,
    ),
    ObjectiveKind.span_corruption: ObjectiveSpec(
        family=Family.encoder_decoder,
        examples=span_examples,
        collator=span_collator,
        loss=lambda o, model: SpanCorruptionObjective(o.label_smoothing, o.loss_chunk),
        targets=labelled,
    ),
    ObjectiveKind.seq2seq: ObjectiveSpec(
        family=Family.encoder_decoder,
        examples=pairs_only,
        collator=pairs_only,
        loss=lambda o, model: Seq2SeqObjective(o.label_smoothing, o.loss_chunk),
        targets=labelled,
    ),
}
