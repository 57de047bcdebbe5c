"""Training windows in which a controlled share repeats an earlier span of themselves.

A repeated window: a span of L tokens (L drawn from [min_span, max_span], at most half the window)
starting at a is copied over the tokens at b >= a + L. Predicting the copy's tokens rewards what an
induction head does: find the earlier occurrence of the current token, copy the token after it. Which
windows repeat, and where, is drawn from (seed, draw, window), like every other random draw of the
pipeline's data, so a resumed or repeated run sees the same windows.

The synthetic tasks (`SyntheticRepeats`) replace the text with random tokens: in "synthetic" every
window carries one copied span; in "periodic" a random sequence of L tokens repeats until the window
is full, L drawn per window, so that every token after the first L is predictable by copying; in
"copies" the window is cut into spans, each after the first either fresh or, half the time, a copy of
a stretch from anywhere earlier in the window. The periodic task still rewards a head that attends a
fixed number of positions back (it finds every window of that one period: docs/findings.md); in
"copies" each copy's distance is drawn anew, so only matching the content finds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from lmforge.induction.config import TASKS
from lmforge.training.datamodule import PretrainDataModule


def longest_span(what: str, length: int, min_span: int, max_span: int) -> int:
    """The longest span of [min_span, max_span] that fits twice in `length` tokens; ValueError if none."""
    top = min(max_span, length // 2)
    if top < min_span:
        raise ValueError(f"{what}: {length} tokens have no room for two spans of {min_span}")
    return top


def repeat_span(ids: torch.Tensor, rng: np.random.Generator, min_span: int, max_span: int) -> torch.Tensor:
    """A copy of the 1-D `ids` whose tokens [b, b + L) repeat its tokens [a, a + L), with a + L <= b."""
    length = ids.numel()
    span = int(rng.integers(min_span, longest_span("repeat_span", length, min_span, max_span) + 1))
    a = int(rng.integers(0, length - 2 * span + 1))
    b = int(rng.integers(a + span, length - span + 1))
    out = ids.clone()
    out[b : b + span] = ids[a : a + span]
    return out


class RepeatedSpans(Dataset):
    """`base`'s windows (items with `input_ids`), a `share` of each draw's windows with a repeated span."""

    def __init__(self, base: Dataset, share: float, min_span: int, max_span: int, seed: int) -> None:
        self.base, self.share, self.min_span, self.max_span, self.seed = base, share, min_span, max_span, seed

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.item(index, 0)

    def item(self, index: int, draw: int) -> dict[str, Any]:
        item = dict(self.base[index])
        rng = np.random.default_rng([self.seed, draw, index])
        if rng.random() < self.share:
            item["input_ids"] = repeat_span(item["input_ids"], rng, self.min_span, self.max_span)
        return item


def periodic(rng: np.random.Generator, length: int, low: int, high: int, min_span: int, max_span: int):
    """`length` tokens: L random tokens from [low, high) repeated to fill them, L from [min_span,
    max_span] (at most half of `length`, so that the sequence repeats at least once)."""
    period = int(rng.integers(min_span, longest_span("periodic", length, min_span, max_span) + 1))
    seq = rng.integers(low, high, period)
    return torch.from_numpy(np.resize(seq, length).astype(np.int64))


def copies(rng: np.random.Generator, length: int, low: int, high: int, min_span: int, max_span: int):
    """`length` random tokens from [low, high) cut into spans of [min_span, max_span]: each span after
    the first is, with probability 1/2, a copy of a stretch of its length from anywhere before it."""
    longest_span("copies", length, min_span, max_span)  # spans run to max_span; the last one is cut
    body = rng.integers(low, high, length)
    start = int(rng.integers(min_span, max_span + 1))  # the first span is always fresh
    while start < length:
        span = int(rng.integers(min_span, max_span + 1))
        if start >= span and rng.random() < 0.5:
            source = int(rng.integers(0, start - span + 1))  # the stretch ends at or before `start`
            end = min(start + span, length)
            body[start:end] = body[source : source + end - start]
        start += span
    return torch.from_numpy(body.astype(np.int64))


class SyntheticRepeats(Dataset):
    """`n` windows of `length` tokens: `bos`, then random tokens from [low, high), drawn afresh from
    (seed, draw, window), laid out as `layout` says: "synthetic", a span of [min_span, max_span] tokens
    copied from an earlier place to a later one (`repeat_span`); "periodic", a sequence of that many
    tokens repeated to the window's end (`periodic`); "copies", spans of that many, half of them copies
    of earlier stretches (`copies`). The copy's distance varies in each, so no one fixed offset predicts
    every copy: with the copy at a fixed distance (the probe's layout, the second half repeating the
    first), a head that attends a fixed number of positions back would do (docs/findings.md)."""

    def __init__(
        self,
        n: int,
        length: int,
        low: int,
        high: int,
        bos: int,
        seed: int,
        min_span: int,
        max_span: int,
        layout: str = "synthetic",
    ) -> None:
        if layout not in TASKS:
            raise ValueError(f"SyntheticRepeats: got layout {layout!r}, expected one of {list(TASKS)}")
        if not 0 <= low < high - 1:
            raise ValueError(
                f"SyntheticRepeats: got token range [{low}, {high}), expected two tokens or more"
            )
        self.n, self.length, self.low, self.high, self.bos, self.seed = n, length, low, high, bos, seed
        self.min_span, self.max_span, self.layout = min_span, max_span, layout

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.item(index, 0)

    def item(self, index: int, draw: int) -> dict[str, Any]:
        rng = np.random.default_rng([self.seed, draw, index])
        if self.layout == "periodic":
            body = periodic(rng, self.length - 1, self.low, self.high, self.min_span, self.max_span)
        elif self.layout == "copies":
            body = copies(rng, self.length - 1, self.low, self.high, self.min_span, self.max_span)
        else:
            tokens = torch.from_numpy(rng.integers(self.low, self.high, self.length - 1).astype(np.int64))
            body = repeat_span(tokens, rng, self.min_span, self.max_span)
        return {"input_ids": torch.cat([torch.tensor([self.bos]), body]), "index": index}


class RepeatDataModule(PretrainDataModule):
    """Pretraining's data module whose training split goes through `RepeatedSpans`; the validation and
    test splits stay natural text."""

    def __init__(
        self,
        *args: Any,
        share: float,
        min_span: int,
        max_span: int,
        synthetic: tuple[int, int] | None = None,
        layout: str = "synthetic",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.share, self.min_span, self.max_span = share, min_span, max_span
        self.synthetic = synthetic  # (low, high): the token ids of the synthetic task; None: the text
        self.layout = layout  # the synthetic task's layout (SyntheticRepeats)

    def dataset(self, split: str) -> Dataset:
        if split == "train" and split not in self.datasets:
            natural = super().dataset(split)
            if self.synthetic is not None:  # as many windows per epoch as the text has, of its length
                low, high = self.synthetic
                n, length = len(natural), self.train.seq_len  # type: ignore[arg-type]
                self.datasets[split] = SyntheticRepeats(
                    n,
                    length,
                    low,
                    high,
                    self.specials.eos,
                    self.seed,
                    self.min_span,
                    self.max_span,
                    layout=self.layout,
                )
            else:
                self.datasets[split] = RepeatedSpans(
                    natural, self.share, self.min_span, self.max_span, self.seed
                )
        return super().dataset(split)
