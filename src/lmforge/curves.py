"""Validation curves as the pretrain stage writes them (`val_loss.csv`: step, val_loss, val_accuracy)
and the step at which one first reaches a loss: read by the time-to-quality benchmark and the knob
study's table."""

from __future__ import annotations

import csv
from pathlib import Path


def read_val_curve(path: Path) -> list[tuple[int, float]]:
    """(step, validation loss) pairs of a `val_loss.csv`, in file order."""
    with open(path, newline="") as f:
        return [(int(row["step"]), float(row["val_loss"])) for row in csv.DictReader(f)]


def steps_to(points: list[tuple[int, float]], target: float) -> float | None:
    """The step at which a validation curve first reaches `target`, linear between evaluations
    (from step 0 at +inf loss: a first evaluation already below the target counts as its step)."""
    before: tuple[int, float] | None = None
    for step, loss in points:
        if loss <= target:
            if before is None:
                return float(step)
            (s0, l0), (s1, l1) = before, (step, loss)
            return s0 + (s1 - s0) * (l0 - target) / (l0 - l1)
        before = (step, loss)
    return None
