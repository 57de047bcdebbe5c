"""What every task source returns, and what it is told.

A source is a function `read(params, ctx) -> Loaded` registered once in `lmforge.tasks.registry`.
It returns either a pool of examples that the builder splits by fraction, or splits the source
already fixes (a missing val split is carved from train), plus provenance and notes for the card.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lmforge.tasks.config import Kind
from lmforge.tasks.records import Example


@dataclass(frozen=True)
class Context:
    task: str  # task name, for error messages
    kind: Kind  # which record schema to produce
    labels: tuple[str, ...]  # the configured label (or tag) set; empty for qa
    cache: Path  # fetched archives live here
    seed: int  # for sources that sample (negative pairs)


@dataclass
class Loaded:
    pool: list[Example] | None = None  # unsplit: the builder splits it by the configured fractions
    given: dict[str, list[Example]] | None = None  # fixed splits from the source: train, test and maybe val
    provenance: dict[str, str] = field(default_factory=dict)  # source, version, sha256, licence
    notes: list[str] = field(default_factory=list)  # what was derived or dropped, and why
