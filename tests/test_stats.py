"""Paired differences and their intervals against hand computation (t table values)."""

from __future__ import annotations

import math

import pytest

from lmforge.stats import NOT_DISTINGUISHABLE, ONE_SEED, interval, paired


def test_paired_difference_and_t_interval_equal_hand_computation():
    a = {0: 0.8, 1: 0.7, 2: 0.9}
    b = {0: 0.6, 1: 0.6, 2: 0.7, 7: 0.1}  # seed 7 has no partner: left out
    d = paired(a, b, ("ours", "scratch"))
    # differences 0.2, 0.1, 0.2: mean 1/6, sd 0.057735; t(0.975, 2 df) = 4.302653
    half = 4.302653 * 0.0577350 / math.sqrt(3)
    assert d.n == 3 and d.mean == pytest.approx(1 / 6)
    assert d.low == pytest.approx(1 / 6 - half, abs=1e-6) and d.high == pytest.approx(1 / 6 + half, abs=1e-6)
    assert d.verdict == "ours higher"
    assert paired(b, a, ("scratch", "ours")).verdict == "ours higher"  # b higher, named


def test_an_interval_that_covers_zero_is_not_distinguishable():
    d = paired({0: 0.80, 1: 0.70, 2: 0.75}, {0: 0.75, 1: 0.75, 2: 0.74})
    assert d.low < 0 < d.high and d.verdict == NOT_DISTINGUISHABLE


def test_one_shared_seed_gives_no_interval_and_says_so():
    d = paired({0: 0.9}, {0: 0.5, 1: 0.6})
    assert (d.mean, d.low, d.high, d.n, d.verdict) == (pytest.approx(0.4), None, None, 1, ONE_SEED)


def test_a_ratio_is_judged_against_one():
    # retention 0.9/1.0, 0.95/1.0, 0.85/1.0: mean 0.9, sd 0.05, half 4.302653 * 0.05 / sqrt(3) = 0.1242
    d = paired({0: 0.9, 1: 0.95, 2: 0.85}, {0: 1.0, 1: 1.0, 2: 1.0}, ("student", "teacher"), ratio=True)
    assert d.mean == pytest.approx(0.9) and d.high == pytest.approx(0.9 + 0.124207, abs=1e-5)
    assert d.verdict == NOT_DISTINGUISHABLE  # 1.0 lies inside [0.776, 1.024]


def test_interval_level_and_errors():
    mean, low, high = interval([1.0, 2.0, 3.0, 4.0], level=0.9)  # t(0.95, 3 df) = 2.353363
    assert mean == 2.5 and high - mean == pytest.approx(2.353363 * 1.2909944 / 2, abs=1e-6)
    with pytest.raises(ValueError, match="share no seed"):
        paired({0: 1.0}, {1: 1.0})
    with pytest.raises(ValueError):
        interval([])
