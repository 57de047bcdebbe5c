"""The prepared-document record and the sharded JSON-lines layout of a prepared corpus.

`data/prepared/` holds each split as numbered shards, `{split}-00000.jsonl`, `{split}-00001.jsonl`,
..., one document per line: `{"id": str, "source": str, "sentences": [str, ...], "meta": {...}}`
(sentences keep document order so that next-sentence prediction can draw real continuations from
them), and `manifest.json`: per split, its shards in order with their documents, bytes and sha256.
A split is read through the manifest, so a stray or half-written file in the folder is never read.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from lmforge.errors import DataError
from lmforge.io import atomic_path, write_json

SPLITS = ("train", "val", "test")
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Document:
    id: str  # unique within the corpus (Brown file name, relative path, dataset row id)
    source: str  # which source produced it, e.g. "brown", "local", "hf:json"
    sentences: tuple[str, ...]  # normalised sentences in document order
    meta: dict[str, Any] = field(default_factory=dict, compare=False)  # e.g. {"genre": "news"}

    def to_json(self) -> str:
        record = {"id": self.id, "source": self.source, "sentences": list(self.sentences), "meta": self.meta}
        return json.dumps(record, ensure_ascii=False)


def shard_name(split: str, index: int) -> str:
    return f"{split}-{index:05d}.jsonl"


class _Shard:
    """One shard being written: a temporary file renamed onto its name when closed whole."""

    def __init__(self, path: Path) -> None:
        self.path, self.documents, self.bytes = path, 0, 0
        self._ctx = atomic_path(path)
        self._file: BinaryIO = open(self._ctx.__enter__(), "wb")
        self._digest = hashlib.sha256()

    def write(self, line: bytes) -> None:
        self._file.write(line)
        self._digest.update(line)
        self.documents += 1
        self.bytes += len(line)

    def close(self, ok: bool = True) -> dict[str, Any]:
        self._file.close()
        self._ctx.__exit__(None if ok else Exception, None, None)
        return {"file": self.path.name, "documents": self.documents, "bytes": self.bytes,
                "sha256": self._digest.hexdigest()}  # fmt: skip


class PreparedWriter:
    """Write documents of every split into `directory` as shards of about `shard_bytes` each, then
    the manifest. Use as a context manager: shards are atomic files and the manifest is written last,
    only when the block exits without an exception."""

    def __init__(self, directory: str | os.PathLike, shard_bytes: int) -> None:
        self.directory, self.shard_bytes = Path(directory), shard_bytes
        self._open: dict[str, _Shard] = {}
        self._done: dict[str, list[dict[str, Any]]] = {split: [] for split in SPLITS}

    def __enter__(self) -> PreparedWriter:
        self.directory.mkdir(parents=True, exist_ok=True)
        return self

    def write_line(self, split: str, line: bytes) -> None:
        """Append one document's JSON line (newline included) to `split`."""
        shard = self._open.get(split)
        if shard is None:
            shard = self._open[split] = _Shard(self.directory / shard_name(split, len(self._done[split])))
        shard.write(line)
        if shard.bytes >= self.shard_bytes:
            self._done[split].append(self._open.pop(split).close())

    def write(self, split: str, document: Document) -> None:
        self.write_line(split, (document.to_json() + "\n").encode("utf-8"))

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        for split, shard in self._open.items():
            self._done[split].append(shard.close(ok=exc_type is None))
        if exc_type is None:
            write_json(self.directory / MANIFEST, {"splits": self.manifest()})

    def manifest(self) -> dict[str, Any]:
        return {
            split: {"documents": sum(s["documents"] for s in shards), "shards": shards}
            for split, shards in self._done.items()
        }

    def files(self) -> list[Path]:
        return [self.directory / s["file"] for shards in self._done.values() for s in shards]


def write_prepared(
    directory: str | os.PathLike, splits: dict[str, Iterable[Document]], shard_bytes: int = 64 << 20
) -> None:
    """Write whole splits at once (tests and small tools; the prepare stage streams)."""
    with PreparedWriter(directory, shard_bytes) as writer:
        for split in SPLITS:
            for doc in splits.get(split, ()):
                writer.write(split, doc)


def split_files(directory: str | os.PathLike, split: str) -> list[Path]:
    """The shard files of `split`, in order, as the manifest lists them."""
    directory = Path(directory)
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        shards = manifest["splits"][split]["shards"]
        return [directory / str(shard["file"]) for shard in shards]
    except FileNotFoundError:
        raise DataError(f"{path} does not exist; run the prepare stage first") from None
    except (ValueError, KeyError, TypeError):
        raise DataError(
            f"{path} is not a prepared corpus manifest with split {split!r}; re-run prepare"
        ) from None


def read_split(directory: str | os.PathLike, split: str) -> Iterator[Document]:
    """Every document of a prepared split, shard after shard."""
    for path in split_files(directory, split):
        yield from read_documents(path)


def read_documents(path: str | os.PathLike) -> Iterator[Document]:
    """Yield the documents of one shard; a missing, non-UTF-8 or malformed file is a DataError."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"prepared shard {path} does not exist; run the prepare stage first")
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            yield parse_line(raw, path, lineno)


def parse_line(raw: bytes, path: Path, lineno: int) -> Document:
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


def iter_sentences(directory: str | os.PathLike, split: str) -> Iterator[str]:
    """Every sentence of a prepared split, documents in file order."""
    for doc in read_split(directory, split):
        yield from doc.sentences
