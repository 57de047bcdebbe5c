"""Verdicts, the intervals they are read from, and the parts a claim is decided on.

A claim is decided part by part (a task, a backbone, a position scheme, a decoder), each part with a
verdict of its own from one vocabulary, read off an interval (or, where the quantity has none, a
ratio against a stated floor):
- reproduced: the interval lies on the claim's side of its threshold;
- refuted: it lies on the other side;
- not distinguishable: it covers the threshold (more seeds or examples would decide);
- not identified: the quantity itself is not pinned down by the data (a fit's exponents).
A part that cannot test the claim (a teacher that beats no scratch) is shown as "not tested". The
claim's headline names each verdict with its parts ("reproduced: pos; not distinguishable:
sentiment"); its verdict is the parts' one verdict, or "mixed".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from scipy import stats

REPRODUCED = "reproduced"
REFUTED = "refuted"
NOT_DISTINGUISHABLE = "not distinguishable"
NOT_IDENTIFIED = "not identified"
PART_VERDICTS = (REPRODUCED, REFUTED, NOT_DISTINGUISHABLE, NOT_IDENTIFIED)  # a decided part's
NOT_TESTED = "not tested"  # no part could be decided (or this part cannot test the claim)
MIXED = "mixed"  # a claim whose decided parts differ (its headline names them)
VERDICTS = (*PART_VERDICTS, MIXED, NOT_TESTED)  # a claim's


def combined(*verdicts: str) -> str:
    """The verdict of a part that needs several things at once: reproduced when every one is, refuted
    when any one is, else not identified when any one is, else not distinguishable."""
    if all(v == REPRODUCED for v in verdicts):
        return REPRODUCED
    for verdict in (REFUTED, NOT_IDENTIFIED):
        if verdict in verdicts:
            return verdict
    return NOT_DISTINGUISHABLE


@dataclass(frozen=True)
class PartVerdict:
    name: str
    verdict: str  # one of PART_VERDICTS, or NOT_TESTED for a part that cannot test the claim
    note: str = ""


@dataclass(frozen=True)
class Finding:
    verdict: str  # one of VERDICTS
    because: str  # how a part is judged (or why nothing could be), in one sentence
    numbers: list[tuple[str, str]] = field(default_factory=list)  # (quantity, value as shown)
    figure: Path | None = None
    needed: str | None = None  # where a part is not reproduced: what would be needed
    parts: list[PartVerdict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict: got {self.verdict!r}, expected one of {VERDICTS}")

    @property
    def headline(self) -> str:
        """Each verdict with the parts that have it (`reproduced: pos; not distinguishable: sentiment`);
        a claim of one part, or none decided, is its verdict alone."""
        if self.verdict == NOT_TESTED or len(self.parts) == 1:
            return self.verdict
        groups = [
            f"{verdict}: {', '.join(p.name for p in self.parts if p.verdict == verdict)}"
            for verdict in (*PART_VERDICTS, NOT_TESTED)
            if any(p.verdict == verdict for p in self.parts)
        ]
        return "; ".join(groups)


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

    def against(self, threshold: float = 0.0, claim: Literal["above", "below"] = "above") -> str:
        """The verdict on "the quantity lies `claim` `threshold`": reproduced when the whole interval
        does, refuted when the whole interval lies on the other side, else (or with no interval) not
        distinguishable."""
        if self.above(threshold):
            return REPRODUCED if claim == "above" else REFUTED
        if self.below(threshold):
            return REFUTED if claim == "above" else REPRODUCED
        return NOT_DISTINGUISHABLE

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
