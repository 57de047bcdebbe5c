"""Memory-mapped token arrays with sentence and document boundaries, and their reader `EncodedSplit`.

For each split of `{encoded_dir}/{tokenizer name}/`:

    {split}.bin            all sentence tokens concatenated, no special tokens (uint16 or uint32)
    {split}.sentences.npy  int64 token offsets, n_sentences + 1: sentence i = bin[s[i]:s[i+1]]
    {split}.documents.npy  int64 sentence offsets, n_documents + 1: doc j = sentences d[j]..d[j+1]-1
    meta.json              dtype, vocab_size, special ids, per-split counts (shared by all splits)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from lmforge.errors import DataError
from lmforge.io import atomic_path

CHUNK = 1 << 20  # offsets read at a time (8 MiB)


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size < 2**16 else np.uint32)


class SplitWriter:
    """Append documents (lists of per-sentence token id lists) to a split's files, atomically.

    Use as a context manager; the files appear only when the block exits without an exception.
    """

    def __init__(self, directory: str | os.PathLike, split: str, dtype: np.dtype) -> None:
        self.directory, self.split, self.dtype = Path(directory), split, np.dtype(dtype)
        self.sentence_offsets, self.document_offsets = [0], [0]

    def __enter__(self) -> SplitWriter:
        self._bin_ctx = atomic_path(self.directory / f"{self.split}.bin")
        self._bin: BinaryIO = open(self._bin_ctx.__enter__(), "wb")
        return self

    def add_document(self, sentences: Iterable[Iterable[int]]) -> None:
        for ids in sentences:
            arr = np.asarray(list(ids), dtype=np.int64)
            if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(self.dtype).max):
                raise DataError(f"token id out of range for {self.dtype} in split {self.split}")
            self._bin.write(arr.astype(self.dtype).tobytes())
            self.sentence_offsets.append(self.sentence_offsets[-1] + arr.size)
        self.document_offsets.append(len(self.sentence_offsets) - 1)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._bin.close()
        if exc_type is None:
            _save_npy(self.directory / f"{self.split}.sentences.npy", self.sentence_offsets)
            _save_npy(self.directory / f"{self.split}.documents.npy", self.document_offsets)
        self._bin_ctx.__exit__(exc_type, exc, tb)

    def counts(self) -> dict[str, int]:
        return {
            "documents": len(self.document_offsets) - 1,
            "sentences": len(self.sentence_offsets) - 1,
            "tokens": self.sentence_offsets[-1],
        }


def _save_npy(path: Path, values: list[int]) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, np.asarray(values, dtype=np.int64))


def _load_offsets(path: Path) -> np.ndarray:
    """An int64 offsets array, or one DataError line: missing, truncated and pickled files refused."""
    try:
        offsets = np.load(path, mmap_mode="r", allow_pickle=False)  # read on demand, like the tokens
    except (OSError, ValueError, EOFError) as err:
        raise DataError(
            f"{path} is missing or corrupt ({str(err).splitlines()[0]}); re-run the encode stage"
        ) from None
    if offsets.dtype != np.int64 or offsets.ndim != 1 or len(offsets) == 0:
        raise DataError(
            f"{path} holds {offsets.dtype} of shape {offsets.shape}; expected a 1-D int64 offsets array"
        )
    return offsets


class EncodedSplit:
    """Read-only view of one encoded split: tokens and offsets memory-mapped, read as they are used."""

    def __init__(self, directory: str | os.PathLike, split: str) -> None:
        self.directory, self.split = Path(directory), split
        meta_path = self.directory / "meta.json"
        if not meta_path.is_file():
            raise DataError(f"{meta_path} does not exist; run the encode stage first")
        try:
            self.meta: dict[str, Any] = json.loads(meta_path.read_text(encoding="utf-8"))
            self.dtype = np.dtype(self.meta["dtype"])
            self.vocab_size: int = int(self.meta["vocab_size"])
            self.special_ids: dict[str, Any] = self.meta["special_ids"]
        except (ValueError, KeyError, TypeError) as err:
            raise DataError(
                f"{meta_path} is not a valid encoding record ({err}); re-run the encode stage"
            ) from None
        bin_path = self.directory / f"{split}.bin"
        if not bin_path.is_file():
            raise DataError(f"{bin_path} does not exist; expected an encoded split (train, val or test)")
        n_bytes = bin_path.stat().st_size
        if n_bytes % self.dtype.itemsize:
            raise DataError(
                f"{bin_path} has {n_bytes} bytes, not a whole number of {self.dtype} tokens; "
                "expected an intact file (re-run the encode stage)"
            )
        # np.memmap refuses empty files; an empty split is represented by an empty array instead.
        self.tokens = np.memmap(bin_path, dtype=self.dtype, mode="r") if n_bytes else np.zeros(0, self.dtype)
        self._fd: int | None = None  # opened by `read`, in each process that reads
        self._offsets_fd: int | None = None  # opened by `sentence_offsets_at`
        self.sentence_offsets = _load_offsets(self.directory / f"{split}.sentences.npy")
        self.document_offsets = _load_offsets(self.directory / f"{split}.documents.npy")
        self._check()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a spawned DataLoader worker or a DDP process) as its location, not its arrays."""
        return {"directory": self.directory, "split": self.split}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"], state["split"])  # type: ignore[misc]

    def _check(self) -> None:
        s, d = self.sentence_offsets, self.document_offsets
        if s[-1] != len(self.tokens) or d[-1] != len(s) - 1 or s[0] != 0 or d[0] != 0:
            raise DataError(
                f"{self.directory}/{self.split}: offsets end at token {s[-1]} / sentence {d[-1]}, but the split "
                f"has {len(self.tokens)} tokens / {len(s) - 1} sentences; expected matching files (re-encode)"
            )

    @property
    def n_documents(self) -> int:
        return len(self.document_offsets) - 1

    @property
    def files(self) -> tuple[str, ...]:
        """The files of this split (tokens, sentence and document offsets) and the encoding record."""
        names = (
            f"{self.split}.bin",
            f"{self.split}.sentences.npy",
            f"{self.split}.documents.npy",
            "meta.json",
        )
        return tuple(str(self.directory / name) for name in names)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def sentence_range(self, doc: int) -> range:
        """Indices of the sentences of document `doc`."""
        return range(int(self.document_offsets[doc]), int(self.document_offsets[doc + 1]))

    def document_token_offsets(self) -> np.ndarray:
        """int64 token offsets of the documents, n_documents + 1: the sentence offsets file read in
        chunks (not through its memory map, which would keep every page of it in this process)."""
        wanted = np.asarray(self.document_offsets)
        out = np.empty(len(wanted), dtype=np.int64)
        path, header = self.directory / f"{self.split}.sentences.npy", self.sentence_offsets.offset
        for start in range(0, len(self.sentence_offsets), CHUNK):
            chunk = np.fromfile(path, dtype=np.int64, count=CHUNK, offset=header + 8 * start)
            lo, hi = np.searchsorted(wanted, [start, start + len(chunk)])
            out[lo:hi] = chunk[wanted[lo:hi] - start]
        return out

    def sentence_offsets_at(self, first: int, stop: int) -> np.ndarray:
        """Sentence offsets [first, stop) as int64, read from the offsets file as `read` reads tokens
        (random reads through the memory map would keep its pages in the process)."""
        if self._offsets_fd is None:
            self._offsets_fd = os.open(self.directory / f"{self.split}.sentences.npy", os.O_RDONLY)
        at = self.sentence_offsets.offset + 8 * first
        return np.frombuffer(os.pread(self._offsets_fd, 8 * (stop - first), at), dtype=np.int64)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop), read from the file rather than the memory map: a long run's random
        reads then leave no pages mapped into the process (its resident memory stays flat; the
        kernel's page cache keeps what is hot)."""
        if self._fd is None:
            self._fd = os.open(self.directory / f"{self.split}.bin", os.O_RDONLY)
        size = self.dtype.itemsize
        return np.frombuffer(os.pread(self._fd, (stop - start) * size, start * size), dtype=self.dtype)

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
