"""Exact-duplicate removal and a deterministic train/val/test split by document, in bounded memory.

Documents are ranked by sha256(f"{seed}:{id}"): a seeded permutation that does not depend on the
order the source yields them in. The first `n_test` ranked documents form the test split, the next
`n_val` the validation split, the rest training; `max_documents` keeps the first N of the ranking,
so smaller slices are nested in larger ones, and a document added to the corpus moves no other
document except across a split boundary. Each split keeps source order.

The ids, content hashes and ranks live in an on-disk SQLite index (`DocumentIndex`) whose page cache
is capped, so memory does not grow with the corpus; the split's boundaries are the ranks at the
cut positions, read from the index, and each document is then routed by comparing its rank with them.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import NamedTuple

from lmforge.data.documents import Document
from lmforge.errors import DataError

CACHE_KIB = 16 * 1024  # SQLite page cache: the index's whole memory, however many documents
RANK_BATCH = 4096  # ranks held before they are written (32 bytes each)


def rank(doc_id: str, seed: int) -> bytes:
    return hashlib.sha256(f"{seed}:{doc_id}".encode("utf-8", "surrogatepass")).digest()


def content_key(doc: Document) -> bytes:
    return hashlib.sha256("\n".join(doc.sentences).encode("utf-8", "surrogatepass")).digest()


class DocumentIndex:
    """The documents seen so far: ids (each must be unique), content hashes (a repeat is a duplicate)
    and the ranks of the kept ones, in a SQLite file at `path` (deleted by `close`)."""

    def __init__(self, path: str | Path, seed: int) -> None:
        self.path, self.seed = Path(path), seed
        self.path.unlink(missing_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{CACHE_KIB}", "temp_store=FILE"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE ids (id TEXT PRIMARY KEY) WITHOUT ROWID")
        self._db.execute("CREATE TABLE texts (key BLOB PRIMARY KEY) WITHOUT ROWID")
        self._db.execute("CREATE TABLE ranks (rank BLOB PRIMARY KEY) WITHOUT ROWID")
        self._db.execute("BEGIN")
        self.kept = self.duplicates = 0
        self._ranks: list[tuple[bytes]] = []  # inserted a batch at a time: nothing reads them before the cut

    def add(self, doc: Document) -> bool:
        """Record `doc`; False when its sentences repeat an earlier document's exactly (or it has
        none). A repeated id is a DataError."""
        if self._db.execute("INSERT OR IGNORE INTO ids VALUES (?)", (doc.id,)).rowcount == 0:
            raise DataError(f"document id {doc.id!r} occurs twice; expected unique ids")
        if not doc.sentences:
            return False
        if self._db.execute("INSERT OR IGNORE INTO texts VALUES (?)", (content_key(doc),)).rowcount == 0:
            self.duplicates += 1
            return False
        self._ranks.append((rank(doc.id, self.seed),))
        if len(self._ranks) >= RANK_BATCH:
            self._flush()
        self.kept += 1
        return True

    def _flush(self) -> None:
        self._db.executemany("INSERT INTO ranks VALUES (?)", self._ranks)
        self._ranks.clear()

    def _rank_at(self, position: int) -> bytes:
        return self._db.execute(
            "SELECT rank FROM ranks ORDER BY rank LIMIT 1 OFFSET ?", (position,)
        ).fetchone()[0]

    def boundaries(self, val_fraction: float, test_fraction: float, max_documents: int | None) -> Boundaries:
        """Where the ranking is cut (see the module docstring)."""
        self._flush()
        n = self.kept if max_documents is None else min(self.kept, max_documents)
        n_test = max(1, round(test_fraction * n))
        n_val = max(1, round(val_fraction * n))
        if n - n_test - n_val < 1:
            raise DataError(
                f"only {n} non-empty unique documents; expected at least 3 so train, val and test each get one"
            )
        return Boundaries(self._rank_at(n_test - 1), self._rank_at(n_test + n_val - 1), self._rank_at(n - 1))

    def close(self) -> None:
        self._db.close()
        self.path.unlink(missing_ok=True)


class Boundaries(NamedTuple):
    """The last rank of test, of val and of train; a rank above `train` is left out (max_documents)."""

    test: bytes
    val: bytes
    train: bytes

    def split_of(self, doc_id: str, seed: int) -> str | None:
        r = rank(doc_id, seed)
        if r <= self.test:
            return "test"
        if r <= self.val:
            return "val"
        return "train" if r <= self.train else None
