"""The `tokenizer` stage: train on the prepared train split, save one tokenizer.json, report on val.

Outputs:
    {tokenizer.dir}/{name}/tokenizer.json
    {tokenizer.reports_dir}/{name}.json   vocab size, tokens/word, bytes/token, UNK rate (val split,
                                          its first 8 MiB: `stats.SAMPLE_BYTES`)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from lmforge.data.config import DataConfig, data_config
from lmforge.data.documents import iter_sentences
from lmforge.errors import DataError
from lmforge.io import atomic_path, write_json
from lmforge.stage import Plan, StageResult, read
from lmforge.tokenizer.builders import check_vocab_size, train_tokenizer
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config, tokenizer_path
from lmforge.tokenizer.stats import tokenizer_stats


def batched(items: Iterator[str], size: int) -> Iterator[list[str]]:
    while batch := list(islice(items, size)):
        yield batch


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class TokenizerTrainPlan(Plan):
    """The `tokenizer` stage's plan."""

    data: DataConfig = read(data_config)
    tokenizer: TokenizerConfig = read(tokenizer_config)


def run(plan: TokenizerTrainPlan) -> StageResult:
    tok_cfg, data = plan.tokenizer, plan.data
    check_vocab_size(tok_cfg)  # before reading any data
    prepared = Path(data.prepared_dir)
    n_seen = 0

    def counted() -> Iterator[str]:
        nonlocal n_seen
        for sentence in iter_sentences(prepared, "train"):
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
    write_json(report, {"name": tok_cfg.name, "kind": tok_cfg.kind.value, "split": "val", **stats})
    metrics = {f"tokenizer/{key}": float(value) for key, value in stats.items()}
    return StageResult(metrics, [str(out), str(report)])
