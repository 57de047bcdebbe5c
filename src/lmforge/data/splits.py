"""Exact-duplicate removal and a deterministic train/val/test split by document.

Documents are ranked by sha256(f"{seed}:{id}"): a seeded permutation that does not depend on the
order the source yields them in. The first `n_test` ranked documents form the test split, the next
`n_val` the validation split, the rest training; `max_documents` keeps the first N of the ranking,
so smaller slices are nested in larger ones. Each split keeps source order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from lmforge.data.documents import SPLITS, Document
from lmforge.errors import DataError


def deduplicate(documents: Sequence[Document]) -> tuple[list[Document], int]:
    """Drop documents whose sentences repeat an earlier document exactly; also drop empty documents.

    Returns (kept documents, number of duplicates dropped). Duplicate ids are a DataError.
    """
    seen_text: set[bytes] = set()
    seen_ids: set[str] = set()
    kept: list[Document] = []
    duplicates = 0
    for doc in documents:
        if doc.id in seen_ids:
            raise DataError(f"document id {doc.id!r} occurs twice; expected unique ids")
        seen_ids.add(doc.id)
        if not doc.sentences:
            continue
        key = hashlib.sha256("\n".join(doc.sentences).encode("utf-8", "surrogatepass")).digest()
        if key in seen_text:
            duplicates += 1
            continue
        seen_text.add(key)
        kept.append(doc)
    return kept, duplicates


def rank(doc_id: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{doc_id}".encode("utf-8", "surrogatepass")).hexdigest()


def split_documents(
    documents: Sequence[Document],
    val_fraction: float,
    test_fraction: float,
    seed: int,
    max_documents: int | None = None,
) -> dict[str, list[Document]]:
    """{"train": [...], "val": [...], "test": [...]}, each non-empty, each in source order."""
    order = sorted(range(len(documents)), key=lambda i: rank(documents[i].id, seed))
    if max_documents is not None:
        order = order[:max_documents]
    n = len(order)
    n_test = max(1, round(test_fraction * n))
    n_val = max(1, round(val_fraction * n))
    if n - n_test - n_val < 1:
        raise DataError(
            f"only {n} non-empty unique documents; expected at least 3 so train, val and test each get one"
        )
    parts = {"test": order[:n_test], "val": order[n_test : n_test + n_val], "train": order[n_test + n_val :]}
    return {name: [documents[i] for i in sorted(parts[name])] for name in SPLITS}
