"""Deterministic, seeded train/val/test splits of task examples, by group.

Groups (a document, a verse, a synset: whatever must not straddle two splits) are ranked by
sha256(f"{seed}:{group}"), a permutation that does not depend on the order the source yields them
in. Whole groups in rank order fill the test split until it holds round(test_fraction * n)
examples, then the validation split; the rest is training. Each split keeps source order, so a
rerun writes byte-identical files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from lmforge.errors import DataError
from lmforge.tasks.records import Example

SPLITS = ("train", "val", "test")


def rank(group: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{group}".encode("utf-8", "surrogatepass")).hexdigest()


def split_examples(
    examples: Sequence[Example], val_fraction: float, test_fraction: float, seed: int
) -> dict[str, list[Example]]:
    """{"train", "val", "test"}: each non-empty, whole groups only, each in source order."""
    n = len(examples)
    targets = {"test": max(1, round(test_fraction * n)), "val": max(1, round(val_fraction * n))}
    return _assign(examples, targets, seed)


def carve_val(given: dict[str, list[Example]], val_fraction: float, seed: int) -> dict[str, list[Example]]:
    """A source gave train and test but no val: hold out val_fraction of train (by group) as val."""
    parts = _assign(given["train"], {"val": max(1, round(val_fraction * len(given["train"])))}, seed)
    return {"train": parts["train"], "val": parts["val"], "test": given["test"]}


def _assign(examples: Sequence[Example], targets: dict[str, int], seed: int) -> dict[str, list[Example]]:
    """Whole groups in rank order fill each held-out split of `targets` in turn; the rest is train."""
    members: dict[str, list[int]] = {}
    for index, ex in enumerate(examples):
        members.setdefault(ex.group, []).append(index)
    if len(members) < len(targets) + 1:
        raise DataError(
            f"only {len(members)} groups of examples ({len(examples)} examples); expected at least "
            f"{len(targets) + 1} so that train and {' and '.join(targets)} each get one"
        )
    chosen: dict[str, list[int]] = {split: [] for split in (*targets, "train")}
    for group in sorted(members, key=lambda g: rank(g, seed)):
        split = next((s for s in targets if len(chosen[s]) < targets[s]), "train")
        chosen[split].extend(members[group])
    if not chosen["train"]:
        raise DataError(f"no examples left for training out of {len(examples)}; expected smaller fractions")
    return {split: [examples[i] for i in sorted(chosen[split])] for split in chosen}
