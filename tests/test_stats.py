"""Paired differences and their intervals against hand computation (t table values)."""

from __future__ import annotations

import math

import pytest

from lmforge.stats import NOT_DISTINGUISHABLE, ONE_SEED, Difference, interval, paired, within


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


@pytest.mark.parametrize(
    "low, high, verdict",
    [
        (-0.02, 0.01, "within 3 points: shown"),  # the whole interval above -0.03
        (-0.03, 0.01, "within 3 points: shown"),  # the end on the margin counts as within
        (-0.049, 0.034, "within 3 points: not identified (the interval crosses -3 points)"),
        (-0.20, -0.05, "more than 3 points below: refuted"),
        (None, None, ONE_SEED),
    ],
)
def test_within_a_margin_is_judged_by_the_interval_against_minus_the_margin(low, high, verdict):
    d = Difference(mean=0.0 if low is None else (low + high) / 2, low=low, high=high, n=3, verdict="")
    assert within(d, 0.03, "3 points") == verdict


def test_within_from_paired_scores_and_a_bad_margin():
    # differences +0.01, -0.023, -0.009: mean -0.00733, sd 0.016563, half 4.302653 * sd / sqrt(3) = 0.041145
    d = paired({0: 0.79, 1: 0.796, 2: 0.792}, {0: 0.78, 1: 0.819, 2: 0.801})
    assert d.low == pytest.approx(-0.007333 - 0.041145, abs=1e-5)
    assert (
        within(d, 0.03).startswith("within 0.03: not identified") and within(d, 0.05) == "within 0.05: shown"
    )
    with pytest.raises(ValueError, match="margin: got 0"):
        within(d, 0.0)
