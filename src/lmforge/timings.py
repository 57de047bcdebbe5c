"""Clock readings, kept apart from what stages read.

A stage's outputs are a function of its inputs and seed: a rerun that reproduces the science changes
no byte of them, so DVC's lock and every consumer stay as they were (docs/pipeline.md, "Landing in
steps"). How long a run took is not such a function. Wall-clock times, throughput and latency go to
the stage's MLflow run (its metrics) and to a timings file that no stage, findings or docs table
depends on: `timings_path(output)` puts the file for an output under `reports/`, say
`reports/finetune/rows/encoder-pos`, at `reports/timings/finetune/rows/encoder-pos.json`; git keeps
it, so a measured time can be quoted and compared, and a rebuild changes only these files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lmforge.io import write_json

FOLDER = "timings"


def timings_path(output: str | os.PathLike) -> Path:
    """The timings file of a stage output: under the nearest `reports` folder above it, in
    `reports/timings/` at the same relative place (`reports/pretrain/encoder` ->
    `reports/timings/pretrain/encoder.json`); an output under no `reports` folder gets
    `<output>.timings.json` beside it."""
    path = Path(output)
    parts = path.parts
    if "reports" in parts:
        at = len(parts) - 1 - parts[::-1].index("reports")
        rest = parts[at + 1 :]
        if rest and rest[0] != FOLDER:
            stem = Path(*rest)
            return Path(*parts[: at + 1], FOLDER, *stem.parent.parts, stem.stem + ".json")
    return path.with_name(path.name + ".timings.json")


def write_timings(output: str | os.PathLike, values: dict[str, Any]) -> Path:
    """Write `values` (numbers, or dicts of them) as the timings of `output`; returns the file."""
    path = timings_path(output)
    write_json(path, values)
    return path


def read_timings(output: str | os.PathLike) -> dict[str, Any]:
    """The timings last written for `output`; {} when there are none or the file is unreadable
    (a clock is never a reason to fail a run)."""
    path = timings_path(output)
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return values if isinstance(values, dict) else {}
