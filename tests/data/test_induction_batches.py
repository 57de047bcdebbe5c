"""The batches the induction study trains on (issue 74 item 2), read through the same data module,
visits and collator as `pipelines/induction.py`, on a corpus whose token ids count up along the text
(10, 11, ...; EOS between documents), so every window's natural tokens are known from its first one:
the configured share of windows carries one copied span, of a configured length, copied from an
earlier place of the same window to a later one, and the copy is in the targets the loss reads."""

from __future__ import annotations

import pytest
import torch

from lmforge.induction.data import RepeatDataModule
from lmforge.tokenizer.specials import SpecialTokens
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, TrainConfig

SPECIALS = SpecialTokens(pad=0, unk=None, cls=None, sep=None, mask=None, eos=1, bos=1, sentinels=())
SEQ, MIN_SPAN, MAX_SPAN = 32, 4, 8


def counting_documents(n_docs: int = 200, length: int = 50) -> list[list[list[int]]]:
    return [[list(range(10 + d * length, 10 + (d + 1) * length))] for d in range(n_docs)]


def epoch(make_encoded, share: float) -> tuple[list[dict[str, torch.Tensor]], dict[int, torch.Tensor]]:
    """One epoch of training batches, and each natural window by its first MIN_SPAN tokens (a copy
    lands at b >= a + length >= MIN_SPAN, so they are never overwritten; the first alone may be EOS)."""
    split = make_encoded(counting_documents(), "train")
    data = RepeatDataModule(
        str(split.directory), ObjectiveConfig(kind=ObjectiveKind.clm), TrainConfig(batch_size=8, seq_len=SEQ),
        SPECIALS, 5000, seed=0, share=share, min_span=MIN_SPAN, max_span=MAX_SPAN,
    )  # fmt: skip
    natural = data.dataset("train").base
    by_first = {head(natural[i]["input_ids"]): natural[i]["input_ids"] for i in range(len(natural))}
    assert len(by_first) == len(natural)
    return list(data.train_dataloader()), by_first


def head(window: torch.Tensor) -> tuple[int, ...]:
    return tuple(window[:MIN_SPAN].tolist())


def the_copy(window: torch.Tensor, natural: torch.Tensor) -> tuple[int, int, int] | None:
    """(a, b, length) of the span of `window` that differs from `natural`, copied from [a, a + length)."""
    differs = (window != natural).nonzero().flatten().tolist()
    if not differs:
        return None
    b, length = differs[0], differs[-1] - differs[0] + 1
    sources = [
        a for a in range(0, b - length + 1) if torch.equal(window[a : a + length], window[b : b + length])
    ]
    assert sources, f"the changed tokens {window[b : b + length].tolist()} copy no earlier span"
    return sources[0], b, length


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_the_configured_share_of_training_windows_repeats_an_earlier_span(make_encoded, share):
    batches, by_first = epoch(make_encoded, share)
    windows = labels = 0
    copies = []
    for batch in batches:
        assert set(batch) == {"input_ids", "labels"}  # no padding, no positions: the model counts 0..T-1
        assert batch["input_ids"].shape[1] == SEQ
        assert torch.equal(batch["labels"], batch["input_ids"])  # the copy is in the targets the loss reads
        labels += 1
        for window in batch["input_ids"]:
            natural = by_first[head(window)]
            windows += 1
            copies.append(the_copy(window, natural))
    found = [c for c in copies if c is not None]
    n = len(copies)
    assert labels and n > 250
    assert abs(len(found) / n - share) <= 3 * (share * (1 - share) / n) ** 0.5 + 1e-9
    for a, b, length in found:
        # a copy may coincide with the natural text at its ends (an EOS onto an EOS): it is never longer
        assert 1 <= length <= MAX_SPAN and a + length <= b and b + length <= SEQ
    if found:  # the drawn lengths, [MIN_SPAN, MAX_SPAN], save where an end coincides
        assert sum(length >= MIN_SPAN for *_, length in found) >= 0.9 * len(found)
