"""Generic sources that need no code per task: local TSV/JSONL files and `datasets.load_dataset`.

Field (column) names come from the task yaml. Formats:
- `.jsonl`: one JSON object a line; tagging reads two list fields (words, tags).
- `.tsv` for classification / pairs: a header row naming the columns, then one example a line.
- `.tsv` for tagging (CoNLL style): one `word<TAB>...<TAB>tag` line per token, a blank line between
  sentences; the first column is the word and the last the tag.
A folder gives fixed splits (`train.*` and `test.*` required, `val.*` optional: carved from train
when absent); a single file is a pool split by the configured fractions.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from lmforge.errors import DataError
from lmforge.io import sha256_files
from lmforge.tasks.config import Kind
from lmforge.tasks.records import Example, example
from lmforge.tasks.sources import Context, Loaded

SPLIT_NAMES = ("train", "val", "test")
SUFFIXES = (".tsv", ".jsonl")


@dataclass
class Fields:
    id: str | None = "id"  # field with an example id; null or absent -> "<split or file>:<line or row>"
    text: str = "text"  # classification / pair: the (first) text
    text_pair: str = "text_pair"  # pair_classification: the second text
    label: str = "label"  # classification / pair: the label (compared with task.labels as a string)
    words: str = "words"  # tagging (jsonl / hf): the list of words
    tags: str = "tags"  # tagging (jsonl / hf): the list of tags, one per word


@dataclass
class LocalParams:
    path: str = MISSING  # a folder with {train,val,test}.{tsv,jsonl}, or one .tsv/.jsonl file
    fields: Fields = field(default_factory=Fields)


@dataclass
class HFParams:
    path: str = MISSING  # first argument of datasets.load_dataset: a builder ("json") or a local folder
    name: str | None = None  # dataset configuration name
    data_files: dict[str, Any] | None = None  # for builders: {train: a.jsonl, test: b.jsonl}
    splits: dict[str, str] = field(default_factory=lambda: {"train": "train"})  # ours -> the dataset's;
    # only train given -> it is split by the task's fractions
    revision: str | None = None  # pin a hub commit for reproducibility
    fields: Fields = field(default_factory=Fields)


def read_local(params: LocalParams, ctx: Context) -> Loaded:
    root = Path(params.path).expanduser()
    provenance = {"source": f"local {root}", "sha256": ""}
    if root.is_file():
        examples = _read_file(root, root.stem, params.fields, ctx)
        provenance["sha256"] = _sha(root)
        return Loaded(pool=examples, provenance=provenance)
    if not root.is_dir():
        raise DataError(f"task.params.path={root} does not exist; expected a folder or a .tsv/.jsonl file")
    given, hashes = {}, []
    for split in SPLIT_NAMES:
        files = [root / f"{split}{suffix}" for suffix in SUFFIXES if (root / f"{split}{suffix}").is_file()]
        if len(files) > 1:
            raise DataError(f"{root} holds {[f.name for f in files]}; expected one file per split")
        if files:
            given[split] = _read_file(files[0], split, params.fields, ctx)
            hashes.append(f"{files[0].name}={_sha(files[0])}")
    if not given:
        raise DataError(f"{root} holds no {{train,val,test}}.{{tsv,jsonl}}; expected at least train and test")
    provenance["sha256"] = ", ".join(hashes)
    return Loaded(given=given, provenance=provenance)


def _sha(path: Path) -> str:
    return sha256_files([path])


def _read_file(path: Path, prefix: str, fields: Fields, ctx: Context) -> list[Example]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not valid UTF-8 (byte {err.start}); expected UTF-8 text") from None
    if path.suffix == ".jsonl":
        rows = [(n, _json_row(line, path, n)) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        return [row_example(row, fields, ctx, f"{prefix}:{n}", f"{path}:{n}") for n, row in rows]
    if ctx.kind is Kind.tagging:
        return _conll_examples(text, path, prefix, ctx)
    reader = csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    return [
        row_example(row, fields, ctx, f"{prefix}:{n}", f"{path}:{n}") for n, row in enumerate(reader, start=2)
    ]


def _json_row(line: str, path: Path, lineno: int) -> dict:
    try:
        row = json.loads(line)
    except ValueError:
        row = None
    if not isinstance(row, dict):
        raise DataError(f"{path}:{lineno} is not a JSON object; expected one JSON object per line")
    return row


def _conll_examples(text: str, path: Path, prefix: str, ctx: Context) -> list[Example]:
    examples, words, tags, start = [], [], [], 1
    for lineno, line in enumerate([*text.splitlines(), ""], start=1):
        if not line.strip():
            if words:
                examples.append(example(ctx.kind, id=f"{prefix}:{start}", words=words, tags=tags))
            words, tags, start = [], [], lineno + 1
            continue
        cells = line.split("\t")
        if len(cells) < 2:
            raise DataError(f"{path}:{lineno} has {len(cells)} column; expected word<TAB>...<TAB>tag")
        words.append(cells[0])
        tags.append(cells[-1].strip())
    return examples


def row_example(
    row: Mapping[str, Any], fields: Fields, ctx: Context, fallback_id: str, where: str
) -> Example:
    """One example of `ctx.kind` from a row (a JSON object, a TSV row or a dataset row)."""
    needed = {
        Kind.classification: (fields.text, fields.label),
        Kind.pair_classification: (fields.text, fields.text_pair, fields.label),
        Kind.tagging: (fields.words, fields.tags),
    }[ctx.kind]
    missing = [name for name in needed if row.get(name) is None]
    if missing:
        raise DataError(f"{where} lacks field(s) {missing}; expected {list(needed)} (set task.params.fields)")
    rid = str(row[fields.id]) if fields.id and row.get(fields.id) is not None else fallback_id
    if ctx.kind is Kind.tagging:
        words, tags = row[fields.words], row[fields.tags]
        if not isinstance(words, list) or not isinstance(tags, list):
            raise DataError(f"{where} has {fields.words}/{fields.tags} that are not lists; expected lists")
        return example(ctx.kind, id=rid, words=[str(w) for w in words], tags=[str(t) for t in tags])
    values = {"text": _text(row[fields.text], where), "label": str(row[fields.label])}
    if ctx.kind is Kind.pair_classification:
        values["text_pair"] = _text(row[fields.text_pair], where)
    return example(ctx.kind, id=rid, **values)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise DataError(f"{where} has text of type {type(value).__name__}; expected a string")
    return " ".join(value.split())


def read_hf(params: HFParams, ctx: Context) -> Loaded:
    import datasets  # slow to import; only this source needs it

    unknown = sorted(set(params.splits) - set(SPLIT_NAMES))
    if unknown or "train" not in params.splits:
        raise DataError(
            f"task.params.splits={dict(params.splits)}; expected keys among {SPLIT_NAMES}, with train"
        )
    given, fingerprints = {}, []
    for ours, theirs in params.splits.items():
        try:
            dataset = datasets.load_dataset(
                params.path,
                params.name,
                data_files=dict(params.data_files) if params.data_files else None,
                split=theirs,
                revision=params.revision,
                cache_dir=str(ctx.cache / "hf"),
            )
        except Exception as err:  # datasets raises many unrelated types for a bad name/path/split
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise DataError(
                f"datasets.load_dataset({params.path!r}, split={theirs!r}) failed: {first}"
            ) from None
        names = _class_names(dataset.features.get(params.fields.label))
        rows = (
            dict(r, **{params.fields.label: names[r[params.fields.label]]}) if names else r for r in dataset
        )
        where = f"{params.path}[{theirs}]"
        given[ours] = [
            row_example(r, params.fields, ctx, f"{ours}:{i}", f"{where} row {i}") for i, r in enumerate(rows)
        ]
        fingerprints.append(f"{theirs}={getattr(dataset, '_fingerprint', '')}")
    provenance = {
        "source": f"datasets.load_dataset({params.path!r}, name={params.name!r}, revision={params.revision!r})",
        "sha256": "n/a (datasets fingerprints: " + ", ".join(fingerprints) + ")",
    }
    if list(given) == ["train"]:
        return Loaded(pool=given["train"], provenance=provenance)
    return Loaded(given=given, provenance=provenance)


def _class_names(feature: Any) -> list[str] | None:
    """Label names of a ClassLabel column (its values are ints), else None."""
    return list(feature.names) if feature is not None and hasattr(feature, "names") else None
