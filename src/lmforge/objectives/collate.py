"""Collators: turn a list of dataset items into a padded batch with the labels an objective needs.

- `CausalLMCollator` (GPT, Radford et al. 2018/2019): labels are the inputs; the objective shifts them.
- `MLMCollator` (BERT, Devlin et al. 2018; RoBERTa, Liu et al. 2019): 80/10/10 masking, static or dynamic,
  with NSP labels passed through for sentence-pair items.
- `SpanCorruptionCollator` (T5, Raffel et al. 2020): encoder inputs with sentinels, teacher-forced
  decoder inputs (start token + targets shifted right) and labels.

Every collator is a plain picklable object, so DataLoader workers can receive it. Padding always
goes on the right; attention masks come from sequence lengths, never from comparing ids with
`pad_id`, so a tokenizer whose pad id doubles as EOS is handled correctly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from lmforge.objectives.masking import IGNORE_INDEX, MLMMasker
from lmforge.objectives.rng import ExampleRNG
from lmforge.objectives.span_corruption import SpanCorruptor

Item = Mapping[str, Any]


def pad_right(sequences: Sequence[Tensor], value: int) -> Tensor:
    """Stack 1-D tensors of varying length into `(B, T_max)`, filling the tail with `value`."""
    return pad_sequence(list(sequences), batch_first=True, padding_value=value)


def length_mask(lengths: Sequence[int], max_length: int) -> Tensor:
    """Long `(B, T_max)`: 1 on the first `lengths[b]` positions of row b, 0 on padding."""
    lengths_t = torch.as_tensor(list(lengths), dtype=torch.long)
    return (torch.arange(max_length)[None, :] < lengths_t[:, None]).long()


def pad(rows: Sequence[Sequence[int] | Tensor], value: int, left: bool = False) -> tuple[Tensor, Tensor]:
    """Rows of ids of varying length as `(B, T_max)` long ids filled with `value`, and the long mask of
    the real positions: on the right (batches to train or score), or with `left=True` on the left
    (prompts that all end at the last column, for generation). The only padding in the project."""
    tensors = [torch.as_tensor(row, dtype=torch.long) for row in rows]
    lengths = [len(t) for t in tensors]
    if not left:
        return pad_right(tensors, value), length_mask(lengths, max(lengths))
    return pad_right([t.flip(0) for t in tensors], value).flip(1), length_mask(lengths, max(lengths)).flip(1)


def _generator(rng: ExampleRNG, item: Item) -> torch.Generator:
    """The generator of this visit of the item: keyed by its dataset index and draw (copy or epoch)."""
    index = item.get("index")
    return rng.generator(None if index is None else int(index), int(item.get("draw", 0)))


class CausalLMCollator:
    """Batch for next-token prediction: `input_ids`, `labels` (padding -> -100), and `attention_mask`
    when some item is shorter than the longest.

    Labels equal the inputs (not shifted): `CausalLMObjective` predicts `labels[:, t + 1]` from
    position t. Packed blocks all have the same length, so normally nothing is padded.
    """

    def __init__(self, pad_id: int = 0) -> None:
        self.pad_id = int(pad_id)

    def __call__(self, items: list[Item]) -> dict[str, Tensor]:
        sequences = [torch.as_tensor(item["input_ids"], dtype=torch.long) for item in items]
        input_ids = pad_right(sequences, self.pad_id)  # (B, T)
        if len({len(s) for s in sequences}) == 1:
            # Nothing padded: no mask, so attention keeps its fused causal fast path.
            return {"input_ids": input_ids, "labels": input_ids.clone()}
        attention_mask = length_mask([len(s) for s in sequences], input_ids.shape[1])  # (B, T)
        labels = input_ids.masked_fill(attention_mask == 0, IGNORE_INDEX)  # (B, T)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class MLMCollator:
    """Batch for masked language modelling (and NSP when items carry `nsp_label`).

    Output: `input_ids` (corrupted), `attention_mask`, `labels` (-100 except at selected positions),
    plus `token_type_ids` (padded with 0) and `nsp_labels` when the items have them. Each item is
    masked on its own, before padding, with the generator of `(seed, item["draw"], item["index"])`:
    static (BERT) or dynamic (RoBERTa) masking is decided by what the dataset puts in `draw`.
    """

    def __init__(
        self,
        pad_id: int,
        mask_id: int,
        vocab_size: int,
        special_ids: Iterable[int | None],
        mlm_probability: float = 0.15,
        seed: int = 0,
        mask_fraction: float = 0.8,
        random_fraction: float = 0.1,
    ) -> None:
        self.pad_id = int(pad_id)
        specials = {int(i) for i in special_ids if i is not None} | {self.pad_id}
        self.masker = MLMMasker(
            mask_id, vocab_size, specials, mlm_probability, mask_fraction, random_fraction
        )
        self.rng = ExampleRNG(seed)

    def __call__(self, items: list[Item]) -> dict[str, Tensor]:
        corrupted, labels = [], []
        for item in items:
            input_ids = torch.as_tensor(item["input_ids"], dtype=torch.long)  # (L,)
            ids, item_labels = self.masker(input_ids, _generator(self.rng, item))
            corrupted.append(ids)
            labels.append(item_labels)
        input_ids = pad_right(corrupted, self.pad_id)  # (B, T)
        batch = {
            "input_ids": input_ids,
            "attention_mask": length_mask([len(s) for s in corrupted], input_ids.shape[1]),  # (B, T)
            "labels": pad_right(labels, IGNORE_INDEX),  # (B, T)
        }
        if "token_type_ids" in items[0]:
            segments = [torch.as_tensor(item["token_type_ids"], dtype=torch.long) for item in items]
            batch["token_type_ids"] = pad_right(segments, 0)  # (B, T)
        if "nsp_label" in items[0]:
            batch["nsp_labels"] = torch.tensor(
                [int(item["nsp_label"]) for item in items], dtype=torch.long
            )  # (B,)
        return batch


class SpanCorruptionCollator:
    """Batch for T5 span corruption, padded to the longest inputs and targets of the batch.

    Output: `input_ids`, `attention_mask` (encoder); `decoder_input_ids` = `[decoder_start_id] +
    targets[:-1]`, `decoder_attention_mask`; `labels` = targets with padding -> -100; `content_mask`,
    true where a label is a dropped text token rather than a sentinel or EOS (about 70% of targets).
    """

    def __init__(
        self,
        sentinel_ids: Sequence[int],
        eos_id: int,
        pad_id: int,
        decoder_start_id: int | None = None,
        noise_density: float = 0.15,
        mean_span_length: float = 3.0,
        seed: int = 0,
    ) -> None:
        self.corruptor = SpanCorruptor(sentinel_ids, eos_id, noise_density, mean_span_length)
        self.pad_id = int(pad_id)
        # T5 starts decoding from the pad token; None keeps that convention.
        self.decoder_start_id = self.pad_id if decoder_start_id is None else int(decoder_start_id)
        self.rng = ExampleRNG(seed)
        self.structure_ids = torch.tensor([*sentinel_ids, eos_id], dtype=torch.long)  # not content

    def __call__(self, items: list[Item]) -> dict[str, Tensor]:
        inputs, targets = [], []
        for item in items:
            tokens = torch.as_tensor(item["input_ids"], dtype=torch.long)  # (L,)
            item_inputs, item_targets = self.corruptor(tokens, _generator(self.rng, item))
            inputs.append(item_inputs)
            targets.append(item_targets)
        start = torch.tensor([self.decoder_start_id], dtype=torch.long)
        decoder_inputs = [torch.cat([start, t[:-1]]) for t in targets]  # teacher forcing: shift right
        input_ids = pad_right(inputs, self.pad_id)  # (B, T_enc)
        labels = pad_right(targets, IGNORE_INDEX)  # (B, T_dec)
        return {
            "input_ids": input_ids,
            "attention_mask": length_mask([len(s) for s in inputs], input_ids.shape[1]),  # (B, T_enc)
            "decoder_input_ids": pad_right(decoder_inputs, self.pad_id),  # (B, T_dec)
            "decoder_attention_mask": length_mask([len(t) for t in targets], labels.shape[1]),  # (B, T_dec)
            "labels": labels,
            "content_mask": (labels != IGNORE_INDEX) & ~torch.isin(labels, self.structure_ids),  # (B, T_dec)
        }
