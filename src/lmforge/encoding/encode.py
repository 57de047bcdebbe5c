"""The `encode` stage: prepared splits -> token arrays with sentence/document boundaries.

It reads both floors below it: the prepared documents (`lmforge.data`) and a trained tokenizer
(`lmforge.tokenizer`).

Every sentence is encoded with `encode_batch_fast(..., add_special_tokens=False)`: the ids of
`encode_batch` without the character offsets, which nothing downstream reads (about 20% less time
per batch on this machine, docs/speed.md); datasets add the special tokens their objective needs. Output layout: see `lmforge.data.encoded`.

It uses every core: `tokenizers`' Rust thread pool is switched on for the stage's own calls
(`every_core`; `make repro` switches it off for the pipeline because other stages fork DataLoader
workers, which this one does not; `RAYON_NUM_THREADS` caps its threads), and the next batch is
encoded in a second thread (the call releases the GIL) while this one writes the last. The ids are
the same either way. Each batch reaches `lmforge.encoding.writer` as flat arrays, so the stage's
memory holds one batch, not a Python object per sentence.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from lmforge.data.config import DataConfig, data_config
from lmforge.data.documents import SPLITS, Document, read_split
from lmforge.data.encoded import token_dtype
from lmforge.encoding.writer import SplitWriter
from lmforge.io import write_json
from lmforge.stage import Plan, StageResult, read
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config, tokenizer_path
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids


def _document_batches(docs: Iterator[Document], n_sentences: int) -> Iterator[list[Document]]:
    """Groups of whole documents holding about `n_sentences` sentences each."""
    batch: list[Document] = []
    size = 0
    for doc in docs:
        batch.append(doc)
        size += len(doc.sentences)
        if size >= n_sentences:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


Encoded = tuple[list[Document], list]  # a batch of documents and the encodings of their sentences


def encode_split(
    tokenizer: Tokenizer, documents: Iterator[Document], writer: SplitWriter, batch_size: int
) -> None:
    """Encode `documents` a batch at a time into `writer`; batch k+1 is encoded while k is written."""

    def encode(docs: list[Document]) -> Encoded:
        return docs, tokenizer.encode_batch_fast(
            [s for doc in docs for s in doc.sentences], add_special_tokens=False
        )

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="encode") as pool:
        pending: Future[Encoded] | None = None
        for docs in _document_batches(documents, batch_size):
            submitted = pool.submit(encode, docs)
            if pending is not None:
                _write(writer, *pending.result())
            pending = submitted
        if pending is not None:
            _write(writer, *pending.result())


def _write(writer: SplitWriter, docs: Sequence[Document], encodings: list) -> None:
    """One batch as flat arrays: the ids of all its sentences, their lengths, the documents' sizes."""
    ids = [encoding.ids for encoding in encodings]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    writer.add_batch(lengths, flat, [len(doc.sentences) for doc in docs])


@contextlib.contextmanager
def every_core() -> Iterator[None]:
    """`tokenizers`' thread pool on inside the block (it reads the variable at each call)."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class EncodePlan(Plan):
    """The `encode` stage's plan."""

    data: DataConfig = read(data_config)
    tokenizer: TokenizerConfig = read(tokenizer_config)


def run(plan: EncodePlan) -> StageResult:
    tok_cfg, data = plan.tokenizer, plan.data
    tok_file = tokenizer_path(tok_cfg.dir, tok_cfg.name)
    tokenizer = load_tokenizer(tok_file)
    vocab_size = tokenizer.get_vocab_size()
    dtype = token_dtype(vocab_size)
    out_dir = Path(tok_cfg.encoded_dir) / tok_cfg.name
    counts, artifacts = {}, []
    for split in SPLITS:
        with every_core(), SplitWriter(out_dir, split, dtype) as writer:
            encode_split(tokenizer, read_split(data.prepared_dir, split), writer, tok_cfg.batch_size)
        counts[split] = writer.counts()
        artifacts += [
            str(out_dir / f"{split}{suffix}") for suffix in (".bin", ".sentences.npy", ".documents.npy")
        ]
    meta = {
        "tokenizer": str(tok_file),
        "tokenizer_sha256": hashlib.sha256(tok_file.read_bytes()).hexdigest(),
        "dtype": dtype.name,
        "vocab_size": vocab_size,
        "special_ids": special_token_ids(tokenizer).to_dict(),
        "splits": counts,
    }
    write_json(out_dir / "meta.json", meta)
    artifacts.append(str(out_dir / "meta.json"))
    metrics = {f"encode/{split}_{key}": float(v) for split, c in counts.items() for key, v in c.items()}
    return StageResult(metrics, artifacts)
