"""Clock readings, kept apart from what stages read.

A stage's outputs are a function of its inputs and seed: a rerun that reproduces the science changes
no byte of them, so DVC's lock and every consumer stay as they were (docs/pipeline.md, "Landing in
steps"). How long a run took is not such a function. Wall-clock times, throughput and latency go to
the stage's MLflow run (its metrics) and to a timings file that no stage, findings or docs table
depends on: `timings_path(output)` puts the file for an output under `reports/`, say
`reports/finetune/rows/encoder-pos`, at `reports/timings/finetune/rows/encoder-pos.json`; git keeps
it, so a measured time can be quoted and compared, and a rebuild changes only these files.

A clock is never a reason to fail a run: reading one that is missing or unreadable gives {}, and
writing one where the disk is full or the folder unwritable warns in one line and goes on.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from lmforge.errors import StorageError
from lmforge.io import write_json

FOLDER = "timings"
log = logging.getLogger(__name__)


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
    write_clock_file(path, values)
    return path


def read_timings(output: str | os.PathLike) -> dict[str, Any]:
    """The timings last written for `output`; {} when there are none or the file is unreadable."""
    return read_clock_file(timings_path(output))


def write_clock_file(path: str | os.PathLike, values: dict[str, Any]) -> bool:
    """Write a clock's JSON to `path` atomically; False, with one warning, when it cannot be written
    (no room, no permission): the run's results matter more than how long they took."""
    try:
        write_json(path, values)
    except (StorageError, OSError) as err:
        log.warning("timings not written: %s", str(err).splitlines()[0])
        return False
    return True


def read_clock_file(path: str | os.PathLike | None) -> dict[str, Any]:
    """A clock's JSON object at `path`; {} for no path, a missing or unreadable file, or not an object."""
    if path is None:
        return {}
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return values if isinstance(values, dict) else {}
