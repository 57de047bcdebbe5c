"""benchmarks.data_scale's corpus builder: whole documents of the pool, and past it, re-cut documents
that prepare would not drop as duplicates."""

from __future__ import annotations

import json
from collections import Counter

from benchmarks import data_scale
from lmforge.data.documents import Document, write_prepared


def test_corpus_passes_over_the_pool_without_repeating_a_document(tmp_path, monkeypatch):
    pool = tmp_path / "pool"
    docs = [
        Document(f"d{i}", "large", tuple(f"Sentence {j} of document {i}." for j in range(8)))
        for i in range(5)
    ]
    write_prepared(pool, {"train": docs, "val": [], "test": []})
    monkeypatch.setattr(data_scale, "POOL", pool)
    pool_bytes = sum(len(s.encode()) for d in docs for s in d.sentences)

    one = tmp_path / "one.jsonl"
    written = data_scale.build_corpus(one, pool_bytes / 2)
    rows = [json.loads(line) for line in one.read_text().splitlines()]
    assert pool_bytes / 2 <= written < pool_bytes and len(rows) < len(docs)
    assert {r["text"] for r in rows} <= {"\n".join(d.sentences) for d in docs}  # whole documents

    three = tmp_path / "three.jsonl"
    written = data_scale.build_corpus(three, 3 * pool_bytes)
    rows = [json.loads(line) for line in three.read_text().splitlines()]
    assert written == 3 * pool_bytes and len(rows) == 15
    assert len({r["text"] for r in rows}) == 15 and len({r["id"] for r in rows}) == 15  # no verbatim repeat
    lines = Counter(line for r in rows for line in r["text"].split("\n"))
    assert set(lines.values()) == {3}  # every sentence of the pool three times, in new orders
