"""One record per task kind: which families can do it, its head, its loss and its predictions.

The fine-tuning module looks a `TaskSpec` up once by `task.kind`, as pretraining does with
`ObjectiveSpec`, so a new kind of task is one entry here; a new task of an existing kind is only a
yaml under conf/task/.

    kind                 families          head                             loss
    classification       encoder, decoder  SequenceHead ([CLS] or last)     cross-entropy on the label
    pair_classification  encoder           SequenceHead over A [SEP] B      cross-entropy on the label
    tagging              encoder, decoder  TokenHead                        cross-entropy on first sub-words
    qa                   encoder           SpanHead (start, end)            mean of start and end CE
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lmforge.config import Family, ModelConfig
from lmforge.errors import ConfigError
from lmforge.finetune.heads import Pooling, SequenceHead, SpanHead, TokenHead
from lmforge.finetune.spans import IGNORE_INDEX, best_spans, span_text
from lmforge.structured import validate

Batch = dict[str, Any]


class TaskKind(str, Enum):
    classification = "classification"
    pair_classification = "pair_classification"
    tagging = "tagging"
    qa = "qa"


@dataclass
class TaskConfig:
    name: str = "sentiment"  # names outputs and runs
    kind: TaskKind = TaskKind.classification
    labels: list[str] = field(default_factory=list)  # label set (classes or tags); empty for qa
    metrics: list[str] = field(default_factory=lambda: ["accuracy"])  # first one selects checkpoints
    max_len: int = 128  # tokens per example, special tokens included; longer texts keep their start
    max_answer_tokens: int = 30  # qa: longest span considered at prediction time
    head_dropout: float = 0.1

    def __post_init__(self) -> None:
        if self.kind is not TaskKind.qa and len(self.labels) < 2:
            raise ConfigError(
                f"task.labels: got {self.labels!r}, expected at least two labels for {self.kind.value}"
            )
        if self.max_len < 8:
            raise ConfigError(f"task.max_len: got {self.max_len}, expected an integer >= 8")


def task_config(values: Any) -> TaskConfig:
    return validate(TaskConfig, values, "task")


def pooling_for(model: ModelConfig) -> Pooling:
    """Encoders read [CLS]; a causal decoder's only position that sees the whole input is the last."""
    return Pooling.last if model.family is Family.decoder else Pooling.cls


def cross_entropy(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    return F.cross_entropy(logits, batch["label"])


def token_cross_entropy(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)


def span_loss(outputs: tuple[torch.Tensor, torch.Tensor], batch: Batch) -> torch.Tensor:
    start, end = outputs
    # -inf outside the context: fill with a finite floor so softmax stays defined at every position
    start, end = start.clamp(min=-1e4), end.clamp(min=-1e4)
    return (F.cross_entropy(start, batch["start"]) + F.cross_entropy(end, batch["end"])) / 2


def label_predictions(logits: torch.Tensor, batch: Batch, task: TaskConfig) -> tuple[list, list]:
    return logits.argmax(-1).tolist(), batch["label"].tolist()


def tag_predictions(logits: torch.Tensor, batch: Batch, task: TaskConfig) -> tuple[list, list]:
    keep = batch["labels"] != IGNORE_INDEX
    predicted = logits.argmax(-1)
    return [p[k].tolist() for p, k in zip(predicted, keep)], [
        g[k].tolist() for g, k in zip(batch["labels"], keep)
    ]


def span_predictions(outputs, batch: Batch, task: TaskConfig) -> tuple[list, list]:
    start, end = outputs
    spans = best_spans(start, end, batch["context_mask"], task.max_answer_tokens)
    texts = [span_text(c, o, s, e) for (s, e), c, o in zip(spans, batch["context"], batch["offsets"])]
    return texts, batch["answers"]


@dataclass(frozen=True)
class TaskSpec:
    families: frozenset[Family]
    head: Callable[[ModelConfig, TaskConfig], nn.Module]
    mask_key: str  # the (B, T) mask the head reads: real tokens, or context tokens for qa
    loss: Callable[[Any, Batch], torch.Tensor]
    predictions: Callable[[Any, Batch, TaskConfig], tuple[list, list]]  # (predicted, gold) per example


_CLASSIFY = dict(
    head=lambda m, t: SequenceHead(m.d_model, len(t.labels), pooling_for(m), t.head_dropout),
    mask_key="attention_mask",
    loss=cross_entropy,
    predictions=label_predictions,
)
TASKS: dict[TaskKind, TaskSpec] = {
    TaskKind.classification: TaskSpec(frozenset({Family.encoder, Family.decoder}), **_CLASSIFY),
    TaskKind.pair_classification: TaskSpec(frozenset({Family.encoder}), **_CLASSIFY),
    TaskKind.tagging: TaskSpec(
        frozenset({Family.encoder, Family.decoder}),
        head=lambda m, t: TokenHead(m.d_model, len(t.labels), t.head_dropout),
        mask_key="attention_mask",
        loss=token_cross_entropy,
        predictions=tag_predictions,
    ),
    TaskKind.qa: TaskSpec(
        frozenset({Family.encoder}),
        head=lambda m, t: SpanHead(m.d_model),
        mask_key="context_mask",
        loss=span_loss,
        predictions=span_predictions,
    ),
}
