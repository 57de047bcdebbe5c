"""The prepared-document record and its JSON-lines file format.

`data/prepared/{split}.jsonl` holds one document per line:
`{"id": str, "source": str, "sentences": [str, ...], "meta": {...}}`; sentences keep document order
so that next-sentence prediction can draw real continuations from them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmforge.errors import DataError
from lmforge.io import atomic_path

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Document:
    id: str  # unique within the corpus (Brown file name, relative path, dataset row id)
    source: str  # which source produced it, e.g. "brown", "local", "hf:json"
    sentences: tuple[str, ...]  # normalised sentences in document order
    meta: dict[str, Any] = field(default_factory=dict, compare=False)  # e.g. {"genre": "news"}

    def to_json(self) -> str:
        record = {"id": self.id, "source": self.source, "sentences": list(self.sentences), "meta": self.meta}
        return json.dumps(record, ensure_ascii=False)


def write_documents(path: str | os.PathLike, documents: Iterable[Document]) -> int:
    """Write documents atomically as JSON lines; return how many were written."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for doc in documents:
            f.write(doc.to_json() + "\n")
            n += 1
    return n


def read_documents(path: str | os.PathLike) -> Iterator[Document]:
    """Yield the documents of a prepared split; a missing, non-UTF-8 or malformed file is a DataError."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"prepared split {path} does not exist; run the prepare stage first")
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            yield _parse_line(raw, path, lineno)


def _parse_line(raw: bytes, path: Path, lineno: int) -> Document:
    try:
        record = json.loads(raw.decode("utf-8"))
        sentences = tuple(record["sentences"])
        if not all(isinstance(s, str) for s in sentences):
            raise TypeError("sentences must be strings")
        return Document(str(record["id"]), str(record["source"]), sentences, record.get("meta") or {})
    except UnicodeDecodeError as err:
        raise DataError(
            f"{path}:{lineno} is not valid UTF-8 (byte {err.start}); expected UTF-8 JSON lines"
        ) from None
    except (ValueError, KeyError, TypeError) as err:
        raise DataError(
            f"{path}:{lineno} is not a prepared document ({err}); expected "
            '{"id": str, "source": str, "sentences": [str, ...]}'
        ) from None


def iter_sentences(path: str | os.PathLike) -> Iterator[str]:
    """Every sentence of a prepared split, documents in file order."""
    for doc in read_documents(path):
        yield from doc.sentences
