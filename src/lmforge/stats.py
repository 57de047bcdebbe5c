"""Compared rows: the difference of two rows' scores, paired by seed, with a Student-t interval.

Two rows that share seeds (the same seed fixes the same head initialisation, data order and, for
a distillation student and its control, the same layers taken) are compared seed by seed: d_i =
a_i - b_i, mean d and its two-sided `level` interval mean(d) ± t_{n-1} · sd(d) / sqrt(n). The
verdict follows from the interval alone: "a higher" or "b higher" when it excludes zero, "not
distinguishable" when it covers zero, and "one seed: no interval" when only one seed is shared (a
single difference has no spread to judge it by). A ratio (a distillation's retention, a/b) gets the
same treatment on the per-seed ratios. A claim that a is at most `margin` below b ("LoRA is within
3 points of full fine-tuning", a non-inferiority claim) is judged by the same interval against
-margin instead of zero (`within`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from scipy import stats

NOT_DISTINGUISHABLE = "not distinguishable"
ONE_SEED = "one seed: no interval"


@dataclass(frozen=True)
class Difference:
    mean: float  # mean over the shared seeds of a - b (or a / b)
    low: float | None  # the interval's ends (None with one seed)
    high: float | None
    n: int  # shared seeds
    verdict: str  # "<a> higher" | "<b> higher" | "not distinguishable" | "one seed: no interval"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def interval(values: list[float], level: float = 0.95) -> tuple[float, float | None, float | None]:
    """Mean of `values` and its two-sided Student-t interval (None, None for fewer than two values)."""
    if not values:
        raise ValueError("interval of no values")
    mean, sd = mean_std(values)
    if len(values) < 2:
        return mean, None, None
    half = stats.t.ppf((1 + level) / 2, len(values) - 1) * sd / math.sqrt(len(values))
    return mean, mean - half, mean + half


def paired(
    a: Mapping[int, float],
    b: Mapping[int, float],
    names: tuple[str, str] = ("a", "b"),
    level: float = 0.95,
    ratio: bool = False,
    null: float | None = None,
) -> Difference:
    """a - b (or a / b with `ratio`) over the seeds both rows ran, with its interval and verdict.

    `null` is the value of no difference: 0 for a difference, 1 for a ratio (the default)."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError(f"{names[0]} and {names[1]} share no seed ({sorted(a)} vs {sorted(b)})")
    values = [a[s] / b[s] if ratio else a[s] - b[s] for s in seeds]
    mean, low, high = interval(values, level)
    null = (1.0 if ratio else 0.0) if null is None else null
    if low is None or high is None:
        verdict = ONE_SEED
    elif low > null:
        verdict = f"{names[0]} higher"
    elif high < null:
        verdict = f"{names[1]} higher"
    else:
        verdict = NOT_DISTINGUISHABLE
    return Difference(mean, low, high, len(seeds), verdict)


def within(d: Difference, margin: float, shown_as: str | None = None) -> str:
    """The verdict on "a is at most `margin` below b" from the interval of a - b: shown when the whole
    interval lies above -margin, refuted when it lies below, "not identified" when it crosses it.
    `shown_as` names the margin in the verdict (e.g. "3 points" for a margin of 0.03)."""
    if margin <= 0:
        raise ValueError(f"margin: got {margin}, expected a positive number")
    name = shown_as or f"{margin:g}"
    if d.low is None or d.high is None:
        return ONE_SEED
    if d.low >= -margin:
        return f"within {name}: shown"
    if d.high < -margin:
        return f"more than {name} below: refuted"
    return f"within {name}: not identified (the interval crosses -{name})"
