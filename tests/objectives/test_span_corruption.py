"""T5 span corruption (Raffel et al. 2020): exact noise counts, span structure, sentinels, round trip."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from lmforge.errors import ConfigError
from lmforge.objectives.span_corruption import (
    _random_segmentation,
    corrupt_spans,
    noise_span_counts,
    random_spans_noise_mask,
    restore_spans,
)

EOS = 1
SENTINELS = list(range(199, 99, -1))  # <extra_id_0> = 199, <extra_id_1> = 198, ... as in T5's vocab tail


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (512, (77, 26)),  # round(76.8) = 77; round(77 / 3) = 26
        (100, (15, 5)),
        (30, (4, 1)),  # round(4.5) = 4: half to even, like T5's Python round()
        (10, (2, 1)),  # round(1.5) = 2; round(0.67) = 1
        (3, (1, 1)),  # at least one noise token
        (1, (1, 1)),  # T5 computes the mask for length 2, then truncates
    ],
)
def test_noise_counts_match_t5_arithmetic(length, expected):
    assert noise_span_counts(length, 0.15, 3.0) == expected


def _runs(mask: torch.Tensor) -> list[tuple[bool, int]]:
    """Run-length encoding: [(is_noise, length), ...]."""
    runs: list[tuple[bool, int]] = []
    for value in mask.tolist():
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return runs


@pytest.mark.parametrize("length", [2, 7, 20, 64, 128, 513])
def test_noise_mask_has_exact_counts_and_alternating_spans(length):
    num_noise, num_spans = noise_span_counts(length, 0.15, 3.0)
    for seed in range(20):
        mask = random_spans_noise_mask(length, 0.15, 3.0, torch.Generator().manual_seed(seed))
        assert mask.shape == (length,) and mask.dtype == torch.bool
        assert int(mask.sum()) == num_noise
        runs = _runs(mask)
        # keep_0 noise_0 keep_1 noise_1 ... : starts with kept tokens, ends with noise, 2n runs.
        assert [noise for noise, _ in runs] == [False, True] * num_spans


def test_segmentation_is_uniform_over_compositions():
    # 4 items in 2 non-empty segments: (1, 3), (2, 2), (3, 1), each with probability 1/3, as T5's shuffle.
    g = torch.Generator().manual_seed(0)
    n = 3000
    counts = Counter(tuple(_random_segmentation(4, 2, g).tolist()) for _ in range(n))
    assert set(counts) == {(1, 3), (2, 2), (3, 1)}
    sd = (n * (1 / 3) * (2 / 3)) ** 0.5
    assert all(abs(c - n / 3) < 5 * sd for c in counts.values())
    lengths = _random_segmentation(77, 26, g)
    assert len(lengths) == 26 and int(lengths.sum()) == 77 and int(lengths.min()) >= 1


def test_corrupt_spans_on_a_hand_worked_example():
    tokens = torch.arange(10, 18)  # a b c d e f g h
    noise = torch.tensor([0, 0, 1, 1, 0, 0, 1, 0], dtype=torch.bool)  # c d, g
    s = torch.tensor(SENTINELS)
    inputs, targets = corrupt_spans(tokens, noise, s, EOS)
    assert inputs.tolist() == [10, 11, 199, 14, 15, 198, 17, EOS]
    assert targets.tolist() == [199, 12, 13, 198, 16, EOS]
    assert torch.equal(restore_spans(inputs, targets, s, EOS), tokens)


@pytest.mark.parametrize("length", [1, 2, 5, 31, 128, 300])
def test_round_trip_and_sentinel_order(length):
    s = torch.tensor(SENTINELS)
    for seed in range(10):
        g = torch.Generator().manual_seed(seed)
        tokens = torch.randint(2, 99, (length,), generator=g)
        tokens[::17] = EOS  # document separators inside a packed block survive the round trip
        mask = random_spans_noise_mask(length, 0.15, 3.0, g)
        inputs, targets = corrupt_spans(tokens, mask, s, EOS)
        num_noise, num_spans = noise_span_counts(length, 0.15, 3.0)
        if length >= 2:
            assert len(inputs) == length - num_noise + num_spans + 1
            assert len(targets) == num_noise + num_spans + 1
        in_sentinels = inputs[torch.isin(inputs, s)].tolist()
        assert in_sentinels == targets[torch.isin(targets, s)].tolist() == SENTINELS[: len(in_sentinels)]
        assert inputs[-1] == EOS and targets[-1] == EOS
        assert torch.equal(restore_spans(inputs, targets, s, EOS), tokens)


def test_bad_settings_are_config_errors():
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ConfigError, match="noise_density"):
        random_spans_noise_mask(100, 1.5, 3.0, g)
    with pytest.raises(ConfigError, match="sentinel"):
        corrupt_spans(
            torch.arange(100), random_spans_noise_mask(100, 0.15, 3.0, g), torch.tensor([7, 8]), EOS
        )
    with pytest.raises(ConfigError, match="too short"):
        random_spans_noise_mask(10, 0.8, 1.0, g)  # 8 noise spans cannot be separated by 2 kept tokens
