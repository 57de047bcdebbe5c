"""Structured config of the `task` group (validated with `lmforge.structured.validate`).

The task-level fields are common to every task; `params` holds the source's own pinned fetch and
read parameters and is validated against the schema its registry entry names
(`lmforge.tasks.registry`), so a typo in either fails with a one-line `ConfigError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from omegaconf import MISSING

from lmforge.errors import ConfigError
from lmforge.structured import CACHE, Group, rooted


class Kind(str, Enum):
    """The record schema a task's JSONL files follow (see `lmforge.tasks.records`)."""

    classification = "classification"  # {"id", "text", "label"}
    pair_classification = "pair_classification"  # {"id", "text", "text_pair", "label"}
    tagging = "tagging"  # {"id", "words": [...], "tags": [...]}
    qa = "qa"  # {"id", "question", "context", "answer_text", "answer_start"}


class Metric(str, Enum):
    """How the fine-tuning stage will score a task."""

    accuracy = "accuracy"
    macro_f1 = "macro_f1"  # unweighted mean of per-label F1
    f1 = "f1"  # binary F1 of the positive label (pairs); SQuAD token-overlap F1 (qa)
    token_accuracy = "token_accuracy"  # tagging: share of tokens tagged right
    exact_match = "exact_match"  # qa: normalised answer equals a gold answer
    # BIO tagging (NER): per entity, CoNLL convention (seqeval): an entity counts when its type and
    # both boundaries are right; micro-averaged over entity types
    entity_f1 = "entity_f1"
    entity_precision = "entity_precision"
    entity_recall = "entity_recall"


ENTITY_METRICS = {Metric.entity_f1, Metric.entity_precision, Metric.entity_recall}


METRICS_FOR = {
    Kind.classification: {Metric.accuracy, Metric.macro_f1, Metric.f1},
    Kind.pair_classification: {Metric.accuracy, Metric.macro_f1, Metric.f1},
    Kind.tagging: {Metric.token_accuracy, Metric.macro_f1, *ENTITY_METRICS},
    Kind.qa: {Metric.exact_match, Metric.f1},
}


@dataclass(frozen=True)
class TaskConfig:
    name: str = MISSING  # task name: the card's title and, by default, the output folder
    kind: Kind = MISSING  # classification | pair_classification | tagging | qa
    source: str = MISSING  # a key of lmforge.tasks.registry.SOURCES
    # the source's parameters: a mapping in yaml, its source's dataclass once the task stage's door has
    # validated it (`lmforge.tasks.registry.sourced_task`); fine-tuning leaves it as written
    params: Any = field(default_factory=dict)
    labels: list[str] | None = None  # label set (tag set for tagging); null for qa
    metrics: list[Metric] = field(default_factory=list)  # metric names it will be scored with
    positive_label: str | None = None  # the label whose F1 `f1` reports (classification kinds)
    val_fraction: float = 0.1  # share held out for validation (when the source gives no val split)
    test_fraction: float = 0.1  # share held out for testing (when the source gives no test split)
    seed: int = 0  # seeds the ranking behind the split: sha256(f"{seed}:{group}")
    # output: {train,val,test}.jsonl, card.md, card.json
    out_dir: str = rooted("data/tasks/${.name}", "${paths.data}/tasks/${.name}")
    cache_dir: str = rooted("~/.cache/lmforge", CACHE)  # fetched archives
    licence: str = "unknown"  # recorded in the card for local/hf sources (fetched sources know theirs)
    # How a model reads it (fine-tuning): tokens per example, special tokens included. Longer inputs
    # keep their beginning (a news article its headline and first paragraphs; QA cuts only the context).
    max_len: int = 128
    # head: longer inputs keep their beginning; head_tail (classification): the first quarter of
    # max_len tokens and the last three quarters (Sun et al. 2019, "How to fine-tune BERT for text
    # classification": a review's verdict is often at its end)
    truncation: str = "head"
    max_answer_tokens: int = 30  # qa: longest span considered at prediction time

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
            raise ConfigError(f"task.name={self.name!r}; expected letters, digits, '_', '.' or '-'")
        for key in ("val_fraction", "test_fraction"):
            value = getattr(self, key)
            if not 0.0 < value < 1.0:
                raise ConfigError(f"task.{key}={value} is out of range; expected 0 < {key} < 1")
        if self.val_fraction + self.test_fraction >= 1.0:
            raise ConfigError(
                f"task.val_fraction + task.test_fraction = {self.val_fraction + self.test_fraction}; "
                "expected < 1 so that examples remain for training"
            )
        if self.max_len < 8:
            raise ConfigError(f"task.max_len={self.max_len}; expected an integer >= 8")
        if self.truncation not in ("head", "head_tail"):
            raise ConfigError(f"task.truncation={self.truncation!r}; expected head or head_tail")
        if self.truncation == "head_tail" and self.kind is not Kind.classification:
            raise ConfigError(
                f"task.truncation=head_tail with kind={self.kind.value}; expected kind=classification "
                "(pairs, tags and QA contexts are cut from the end)"
            )
        if self.max_answer_tokens < 1:
            raise ConfigError(f"task.max_answer_tokens={self.max_answer_tokens}; expected an integer >= 1")
        if self.kind is Kind.qa and self.labels is not None:
            raise ConfigError(f"task.labels={self.labels}; expected null for kind=qa (answers are spans)")
        if self.kind is not Kind.qa and (not self.labels or len(set(self.labels)) != len(self.labels)):
            raise ConfigError(f"task.labels={self.labels}; expected a non-empty list of distinct labels")
        if not self.metrics:
            raise ConfigError(f"task.metrics is empty; expected some of {_names(METRICS_FOR[self.kind])}")
        binary_f1 = Metric.f1 in self.metrics and self.kind in (Kind.classification, Kind.pair_classification)
        if binary_f1 and self.positive_label not in (self.labels or ()):
            raise ConfigError(
                f"task.positive_label={self.positive_label!r}; metric f1 scores one label against the "
                f"others: expected one of {self.labels}"
            )
        wrong = [m.value for m in self.metrics if m not in METRICS_FOR[self.kind]]
        if wrong:
            raise ConfigError(
                f"task.metrics={wrong} do not apply to kind={self.kind.value}; "
                f"expected some of {_names(METRICS_FOR[self.kind])}"
            )
        bad = not_bio(self.labels or ())
        if ENTITY_METRICS & set(self.metrics) and bad:
            raise ConfigError(
                f"task.labels has {bad}; entity metrics read BIO tags: expected O and B-<type>, I-<type> "
                "with a B- tag for every I- tag"
            )


def not_bio(labels: Sequence[str]) -> list[str]:
    """The labels that break the BIO scheme (O, B-<type>, I-<type>, an I- only with its B-)."""
    begins = {label[2:] for label in labels if label.startswith("B-") and len(label) > 2}
    return [
        label for label in labels if label != "O" and not (label[:2] in ("B-", "I-") and label[2:] in begins)
    ] + ([] if "O" in labels else ["no O"])


def _names(metrics: set[Metric]) -> list[str]:
    return sorted(m.value for m in metrics)


task_config = Group(TaskConfig, "task")
