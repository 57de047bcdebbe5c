"""Writes one encoded split in `lmforge.data.encoded`'s layout, in memory bounded by one batch.

Tokens go to `{split}.bin` as they come; the sentence and document offsets go, as raw int64, to
temporary files beside their `.npy`, which are written (header, then the raw offsets in 1 MiB
chunks) when the split is complete. Nothing held grows with the corpus: no Python int per sentence,
no list of ids. The files are the ones `np.save` writes for the same offsets, byte for byte.

The outputs go through `lmforge.io.atomic_path` (the raw offsets are plain temporaries, removed on
close): the split appears only when the block exits without an exception, and a failed or killed
run leaves no file a reader would take as whole.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from lmforge.errors import DataError
from lmforge.io import atomic_path

CHUNK = 1 << 20  # bytes copied at a time from a raw offsets file into its .npy
OFFSET = np.dtype("<i8")


class SplitWriter:
    """Append documents to a split's files; use as a context manager.

    `add_batch` takes a batch as flat arrays (the fast path of the encode stage); `add_document`
    one document as per-sentence id lists.
    """

    def __init__(self, directory: str | os.PathLike, split: str, dtype: np.dtype) -> None:
        self.directory, self.split, self.dtype = Path(directory), split, np.dtype(dtype)
        self.n_tokens = self.n_sentences = self.n_documents = 0
        self._max_id = np.iinfo(self.dtype).max

    def __enter__(self) -> SplitWriter:
        self._stack = contextlib.ExitStack()
        try:
            self._bin = self._stack.enter_context(
                open(self._stack.enter_context(atomic_path(self.directory / f"{self.split}.bin")), "wb")
            )
            self._sentences = self._stack.enter_context(self._scratch("sentences"))
            self._documents = self._stack.enter_context(self._scratch("documents"))
        except BaseException:
            self._stack.close()
            raise
        self._sentences.write(np.zeros(1, OFFSET).tobytes())
        self._documents.write(np.zeros(1, OFFSET).tobytes())
        return self

    def _scratch(self, kind: str) -> BinaryIO:
        """A raw offsets file beside the outputs, named as `atomic_path` names its temporaries (so a
        killed run's leftovers look like them), removed when closed."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed by the writer's exit stack)
            prefix=f".{self.split}.{kind}.raw.", suffix=".tmp", dir=self.directory
        )

    def add_batch(self, sentence_lengths: np.ndarray, ids: np.ndarray, document_sizes: Sequence[int]) -> None:
        """Documents of `document_sizes[j]` sentences each, whose sentences have `sentence_lengths`
        tokens, all the ids in `ids` (int64, concatenated)."""
        lengths = np.asarray(sentence_lengths, dtype=np.int64)
        sizes = np.asarray(document_sizes, dtype=np.int64)
        if int(lengths.sum()) != len(ids) or int(sizes.sum()) != len(lengths):
            raise ValueError(
                f"a batch of {len(ids)} ids, {len(lengths)} sentence lengths summing to {int(lengths.sum())} "
                f"and {len(sizes)} documents of {int(sizes.sum())} sentences; expected them to agree"
            )
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) > self._max_id):
            raise DataError(f"token id out of range for {self.dtype} in split {self.split}")
        self._bin.write(ids.astype(self.dtype).tobytes())
        self._sentences.write((self.n_tokens + np.cumsum(lengths)).astype(OFFSET).tobytes())
        self._documents.write((self.n_sentences + np.cumsum(sizes)).astype(OFFSET).tobytes())
        self.n_tokens += len(ids)
        self.n_sentences += len(lengths)
        self.n_documents += len(sizes)

    def add_document(self, sentences: Iterable[Iterable[int]]) -> None:
        ids = [list(s) for s in sentences]
        flat = np.fromiter((i for s in ids for i in s), dtype=np.int64)
        self.add_batch(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)), flat, [len(ids)])

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """On success the offsets' .npy files are written, then the .bin is renamed into place; on
        an exception (the block's or the writing's) the .bin is dropped. The raw files always go."""
        if exc_type is None:
            try:
                for kind, raw in (("sentences", self._sentences), ("documents", self._documents)):
                    raw.flush()
                    _npy_from_raw(Path(raw.name), self.directory / f"{self.split}.{kind}.npy")
            except BaseException as err:
                self._stack.__exit__(type(err), err, err.__traceback__)
                raise
        self._stack.__exit__(exc_type, exc, tb)

    def counts(self) -> dict[str, int]:
        return {"documents": self.n_documents, "sentences": self.n_sentences, "tokens": self.n_tokens}


def _npy_from_raw(raw: Path, path: Path) -> None:
    """`path` as `np.save` writes the int64 vector held raw in `raw`, copied a chunk at a time."""
    n = raw.stat().st_size // OFFSET.itemsize
    header = {"descr": np.lib.format.dtype_to_descr(OFFSET), "fortran_order": False, "shape": (n,)}
    with atomic_path(path) as tmp, open(tmp, "wb") as out, open(raw, "rb") as src:
        np.lib.format.write_array_header_1_0(out, header)
        while chunk := src.read(CHUNK):
            out.write(chunk)
