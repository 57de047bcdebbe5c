"""Build one task dataset: read its source, drop duplicates, split, validate every record, write once.

Outputs, all written only after every record of every split passed its checks (a bad record leaves
the previous outputs intact), each file atomically:
    {out_dir}/{train,val,test}.jsonl   uniform records (see `lmforge.tasks.records`)
    {out_dir}/card.md, card.json       provenance, licence, notes, counts per split and label
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from lmforge.corpora.fetch import cache_root
from lmforge.errors import DataError
from lmforge.io import sha256_files, write_json, write_text
from lmforge.stage import Plan, StageResult, read
from lmforge.tasks import card
from lmforge.tasks.config import TaskConfig
from lmforge.tasks.records import Example, check, check_unique_ids, input_key, write_records
from lmforge.tasks.registry import SOURCES, sourced_task_config
from lmforge.tasks.sources import Context, Loaded
from lmforge.tasks.splits import SPLITS, carve_val, split_examples


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class TaskPlan(Plan):
    """The `task` stage's plan."""

    task: TaskConfig = read(sourced_task_config)  # `params`: its source's dataclass


def run(plan: TaskPlan) -> StageResult:
    task = plan.task
    ctx = Context(task.name, task.kind, tuple(task.labels or ()), cache_root(task.cache_dir), task.seed)
    loaded = SOURCES[task.source].read(task.params, ctx)
    loaded.provenance.setdefault("licence", task.licence)  # local/hf data: the yaml says; fetched: the source
    splits = _splits(task, loaded)
    records = {split: [ex.record for ex in splits[split]] for split in SPLITS}
    for split in SPLITS:
        check(task.name, task.kind, task.labels, split, records[split])
    check_unique_ids(task.name, records)

    out = Path(task.out_dir)
    for split in SPLITS:
        write_records(out / f"{split}.jsonl", records[split])
    hashes = {split: sha256_files([out / f"{split}.jsonl"]) for split in SPLITS}
    facts = card.summary(task, records, loaded.provenance, loaded.notes, hashes)
    write_json(out / "card.json", facts)
    write_text(out / "card.md", card.render(facts))
    metrics = {f"{split}_examples": float(len(records[split])) for split in SPLITS}
    artifacts = [
        str(out / name) for name in ("train.jsonl", "val.jsonl", "test.jsonl", "card.md", "card.json")
    ]
    return StageResult(metrics, artifacts)


def _splits(task: TaskConfig, loaded: Loaded) -> dict[str, list[Example]]:
    if loaded.given is not None:
        given = loaded.given
        if not given.get("train") or not given.get("test"):
            counts = {split: len(given.get(split, [])) for split in SPLITS}
            raise DataError(
                f"task {task.name}: source splits hold {counts}; expected non-empty train and test"
            )
        return dict(given) if given.get("val") else carve_val(given, task.val_fraction, task.seed)
    if loaded.pool is None:
        raise DataError(
            f"task {task.name}: source {task.source} returned no examples; expected a pool or splits"
        )
    unique = _deduplicate(task, loaded)
    return split_examples(unique, task.val_fraction, task.test_fraction, task.seed)


def _deduplicate(task: TaskConfig, loaded: Loaded) -> list[Example]:
    """Keep the first of examples whose inputs are identical, so no test input is also a training input."""
    seen: dict[str, Any] = {}
    kept, conflicts = [], 0
    for ex in loaded.pool or []:
        key = input_key(task.kind, ex.record)
        if key in seen:
            conflicts += seen[key] != _target(ex.record)
            continue
        seen[key] = _target(ex.record)
        kept.append(ex)
    dropped = len(loaded.pool or []) - len(kept)
    if dropped:
        loaded.notes.append(
            f"Exact duplicate inputs dropped: {dropped} of {len(loaded.pool or [])} "
            f"({conflicts} of them with a different label than the kept copy)."
        )
    return kept


def _target(record: dict) -> Any:
    return record.get("label", record.get("tags", record.get("answer_text")))
