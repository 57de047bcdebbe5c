"""The uniform JSONL record of each task kind, and the checks every record passes before anything is written.

    classification       {"id", "text", "label"}
    pair_classification  {"id", "text", "text_pair", "label"}
    tagging              {"id", "words": [...], "tags": [...]}
    qa                   {"id", "question", "context", "answer_text", "answer_start"}

`answer_start` is a character offset: `context[answer_start:answer_start + len(answer_text)]` is the
answer. A bad record is a one-line `DataError` naming the task, split, record id and the bad value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lmforge.errors import DataError
from lmforge.io import atomic_path
from lmforge.tasks.config import Kind

FIELDS = {
    Kind.classification: ("id", "text", "label"),
    Kind.pair_classification: ("id", "text", "text_pair", "label"),
    Kind.tagging: ("id", "words", "tags"),
    Kind.qa: ("id", "question", "context", "answer_text", "answer_start"),
}
TEXT_FIELDS = {  # non-empty strings
    Kind.classification: ("text",),
    Kind.pair_classification: ("text", "text_pair"),
    Kind.tagging: (),
    Kind.qa: ("question", "context", "answer_text"),
}


@dataclass(frozen=True)
class Example:
    record: dict[str, Any]  # the JSONL record, keys in FIELDS order
    group: str  # examples sharing a group land in the same split (a document, a verse, a synset)


def example(kind: Kind, group: str | None = None, **values: Any) -> Example:
    """An Example whose record has exactly the fields of `kind`, in schema order."""
    missing = [key for key in FIELDS[kind] if key not in values]
    if missing or len(values) != len(FIELDS[kind]):
        raise DataError(f"{kind.value} record has fields {sorted(values)}; expected {list(FIELDS[kind])}")
    record = {key: values[key] for key in FIELDS[kind]}
    return Example(record, str(record["id"]) if group is None else group)


def input_key(kind: Kind, record: dict[str, Any]) -> str:
    """What a model sees of a record (no id, no label): equal keys are exact duplicates."""
    if kind is Kind.tagging:
        return json.dumps(record["words"], ensure_ascii=False)
    if kind is Kind.qa:
        return json.dumps([record["question"], record["context"]], ensure_ascii=False)
    return json.dumps([record[key] for key in TEXT_FIELDS[kind]], ensure_ascii=False)


def check(task: str, kind: Kind, labels: Sequence[str] | None, split: str, records: Sequence[dict]) -> None:
    """Raise a one-line DataError for the first bad record of a split, or for an empty split."""
    if not records:
        raise DataError(f"task {task}: the {split} split is empty; expected at least one example")
    allowed = set(labels or ())
    for record in records:
        where = f"task {task}: {split} record {record.get('id')!r}"
        for key in TEXT_FIELDS[kind]:
            value = record.get(key)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"{where} has {key}={value!r}; expected a non-empty string")
        if kind in (Kind.classification, Kind.pair_classification) and record["label"] not in allowed:
            raise DataError(f"{where} has label {record['label']!r}; expected one of {list(labels or ())}")
        if kind is Kind.tagging:
            _check_tagging(where, record, allowed, labels)
        if kind is Kind.qa:
            _check_span(where, record)


def _check_tagging(where: str, record: dict, allowed: set[str], labels: Sequence[str] | None) -> None:
    words, tags = record["words"], record["tags"]
    if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
        raise DataError(
            f"{where} has words={str(words)[:80]}; expected a non-empty list of non-empty strings"
        )
    if not isinstance(tags, list) or len(tags) != len(words):
        raise DataError(
            f"{where} has {len(words)} words and tags={str(tags)[:80]}; expected one tag per word"
        )
    bad = next((tag for tag in tags if tag not in allowed), None)
    if bad is not None:
        raise DataError(f"{where} has tag {bad!r}; expected one of {list(labels or ())}")


def _check_span(where: str, record: dict) -> None:
    start, answer, context = record["answer_start"], record["answer_text"], record["context"]
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise DataError(f"{where} has answer_start={start!r}; expected a character offset >= 0")
    found = context[start : start + len(answer)]
    if found != answer:
        raise DataError(
            f"{where} has answer_text={answer!r} but context[{start}:{start + len(answer)}]={found!r}; "
            "expected the answer to be that span of the context"
        )


def check_unique_ids(task: str, splits: dict[str, Sequence[dict]]) -> None:
    seen: dict[str, str] = {}
    for split, records in splits.items():
        for record in records:
            rid = record["id"]
            if rid in seen:
                raise DataError(
                    f"task {task}: id {rid!r} occurs in {seen[rid]} and {split}; expected unique ids"
                )
            seen[rid] = split


def write_records(path: str | os.PathLike, records: Iterable[dict]) -> None:
    """One JSON object a line, UTF-8, written atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
