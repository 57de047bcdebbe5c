"""The `tokenizer` stage: train on the prepared train split, save one tokenizer.json, report on val.

Training reads the prepared train split, or an evenly spaced sample of its documents when the split
holds more than `tokenizer.train_mb` MB (every k-th document: each part of the corpus in proportion,
with a bounded count of distinct words, so the trainer's memory stays flat; docs/data.md).

Outputs:
    {tokenizer.dir}/{name}/tokenizer.json
    {tokenizer.reports_dir}/{name}.json   vocab size, tokens/word, bytes/token, UNK rate (val split,
                                          its first 8 MiB: `stats.SAMPLE_BYTES`); the train
                                          documents read and the sample's stride
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from lmforge.data.config import DataConfig, data_config
from lmforge.data.documents import Document, iter_sentences, parse_line, split_files
from lmforge.errors import DataError
from lmforge.io import atomic_path, write_json
from lmforge.stage import Plan, StageResult, read
from lmforge.tokenizer.builders import check_vocab_size, train_tokenizer
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config, tokenizer_path
from lmforge.tokenizer.stats import tokenizer_stats


def batched(items: Iterator[str], size: int) -> Iterator[list[str]]:
    while batch := list(islice(items, size)):
        yield batch


def sample_stride(files: list[Path], max_mb: float) -> int:
    """k such that every k-th document of `files` holds at most about `max_mb` MB (1: all of them)."""
    total = sum(path.stat().st_size for path in files if path.is_file())
    if max_mb <= 0:
        return 1
    return max(1, -(-total // max(1, round(max_mb * 1e6))))  # ceil, in whole bytes


def every_kth(files: list[Path], every: int) -> Iterator[Document]:
    """Documents 0, k, 2k, ... of the shards in order, counted across shards; only those are parsed."""
    index = 0
    for path in files:
        if not path.is_file():
            raise DataError(f"prepared shard {path} does not exist; run the prepare stage first")
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                if index % every == 0:
                    yield parse_line(raw, path, lineno)
                index += 1


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class TokenizerTrainPlan(Plan):
    """The `tokenizer` stage's plan."""

    data: DataConfig = read(data_config)
    tokenizer: TokenizerConfig = read(tokenizer_config)


def run(plan: TokenizerTrainPlan) -> StageResult:
    tok_cfg, data = plan.tokenizer, plan.data
    check_vocab_size(tok_cfg)  # before reading any data
    prepared = Path(data.prepared_dir)
    files = split_files(prepared, "train")
    every = sample_stride(files, tok_cfg.train_mb)
    n_seen = n_documents = 0

    def counted() -> Iterator[str]:
        nonlocal n_seen, n_documents
        for doc in every_kth(files, every):
            n_documents += 1
            for sentence in doc.sentences:
                n_seen += 1
                yield sentence

    tokenizer = train_tokenizer(tok_cfg, batched(counted(), tok_cfg.batch_size))
    if n_seen == 0:
        raise DataError(f"the train split of {prepared} has no sentences; expected a non-empty train split")
    stats = tokenizer_stats(tokenizer, iter_sentences(prepared, "val"))

    out = tokenizer_path(tok_cfg.dir, tok_cfg.name)
    with atomic_path(out) as tmp:
        tokenizer.save(str(tmp))
    report = Path(tok_cfg.reports_dir) / f"{tok_cfg.name}.json"
    trained_on = {"train_documents": n_documents, "train_sentences": n_seen, "train_every": every}
    write_json(
        report, {"name": tok_cfg.name, "kind": tok_cfg.kind.value, "split": "val", **stats, **trained_on}
    )
    metrics = {f"tokenizer/{key}": float(value) for key, value in stats.items()}
    return StageResult(metrics, [str(out), str(report)])
