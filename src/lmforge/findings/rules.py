"""Verdicts, the intervals they are read from, and the parts a claim is decided on.

A claim is decided part by part (a task, a backbone, a position scheme, a decoder): each part holds
or fails its claim's rule, a part that cannot test the claim (a teacher that beats no scratch) is
shown but not decided, and the verdict follows from the parts: every decided part holds, or not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scipy import stats

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced at this scale"
NOT_TESTED = "not tested"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_TESTED)


@dataclass(frozen=True)
class Finding:
    verdict: str  # one of VERDICTS
    because: str  # the rule's outcome in one sentence
    numbers: list[tuple[str, str]] = field(default_factory=list)  # (quantity, value as shown)
    figure: Path | None = None
    needed: str | None = None  # for a claim not reproduced: what would be needed

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict: got {self.verdict!r}, expected one of {VERDICTS}")


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float | None
    high: float | None

    @classmethod
    def of(cls, d: Mapping[str, Any], mean_key: str = "mean") -> Interval:
        """From a report's record: `{mean_key, low, high}` (a summary's comparison: `difference`)."""
        return cls(float(d[mean_key]), d.get("low"), d.get("high"))

    @classmethod
    def flat(cls, m: Mapping[str, Any], key: str) -> Interval:
        """From a flat metrics file: `key`, `key_low`, `key_high` (the latter two may be absent)."""
        return cls(float(m[key]), m.get(f"{key}_low"), m.get(f"{key}_high"))

    @property
    def has_spread(self) -> bool:
        return self.low is not None and self.high is not None

    def above(self, value: float = 0.0) -> bool:
        return self.has_spread and self.low > value

    def below(self, value: float = 0.0) -> bool:
        return self.has_spread and self.high < value

    def show(self, scale: float = 1.0, digits: int = 3, suffix: str = "", signed: bool = True) -> str:
        f = f"{{:{'+' if signed else ''}.{digits}f}}"
        text = f.format(scale * self.mean) + suffix
        if not self.has_spread:
            return text + " (no interval)"
        return f"{text} [{f.format(scale * self.low)}, {f.format(scale * self.high)}]"

    def points(self) -> str:
        """A difference of two scores in [0, 1], in points: `+1.2 points [+1.0, +2.0]`."""
        return self.show(scale=100, digits=1, suffix=" points")


@dataclass(frozen=True)
class Part:
    """One part of a claim: the values its rule reads (intervals or numbers, by name)."""

    name: str
    values: Mapping[str, Any]
    informative: bool = True  # False: shown in the report, not decided (it cannot test the claim)
    note: str = ""  # how the part fared, in the words of its own test (LoRA's margin verdict)


@dataclass(frozen=True)
class Measured:
    """What a claim's reader found: its parts, the numbers the report shows, a figure, and the words
    the claim's texts need beyond the parts' names (`{budget}`, `{unread}`)."""

    parts: list[Part]
    numbers: list[tuple[str, str]] = field(default_factory=list)
    figure: Path | None = None
    words: Mapping[str, str] = field(default_factory=dict)


def welch(
    mean_a: float, std_a: float, n_a: int, mean_b: float, std_b: float, n_b: int, level: float = 0.95
) -> Interval:
    """a - b of two independent groups from their means, stds and sizes: Welch's t interval
    (no interval when either group has a single value)."""
    d = mean_a - mean_b
    if n_a < 2 or n_b < 2:
        return Interval(d, None, None)
    va, vb = std_a**2 / n_a, std_b**2 / n_b
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(d, d, d)
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    half = stats.t.ppf(0.5 + level / 2, df) * se
    return Interval(d, d - half, d + half)
