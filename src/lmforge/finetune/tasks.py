"""One registry entry per task kind: the head each family uses, its loss and predictions, the metrics
and the baselines. The task's own config (data, labels, metrics, input length) is the `task` group,
`lmforge.tasks.config.TaskConfig`: one schema for building the data and for learning it.

The fine-tuning module looks `TASKS[kind].heads[family]` up once, as pretraining does with
`OBJECTIVES`, so a new kind of task or a new family's head is one entry here; a new task of an
existing kind is only a yaml under conf/task/.

    kind                 family           head                            loss
    classification       encoder          SequenceHead on [CLS]           cross-entropy on the label
                         decoder          SequenceHead on the last token  cross-entropy on the label
                         encoder_decoder  LabelWords (text-to-text, T5)   NLL of the label's words
    pair_classification  encoder          SequenceHead over A [SEP] B     cross-entropy on the label
    tagging              encoder, decoder TokenHead                       cross-entropy on first sub-words
    qa                   encoder          SpanHead (start, end)           mean of start and end CE
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lmforge.finetune import baselines
from lmforge.finetune.heads import LabelWords, Pooling, SequenceHead, SpanHead, TokenHead
from lmforge.finetune.metrics import ENTITY_SCORES, LABEL_METRICS, entity_scores, squad_scores
from lmforge.finetune.spans import IGNORE_INDEX, best_spans, span_text
from lmforge.model.config import Family, ModelConfig
from lmforge.tasks.config import Kind, TaskConfig

Batch = dict[str, Any]
Record = dict[str, Any]


@dataclass(frozen=True)
class HeadContext:
    """What a head is built from besides the model: the task, its dropout, and for text-to-text the
    token ids of each label's words (the stage tokenizes them with the model's tokenizer)."""

    task: TaskConfig
    dropout: float
    label_ids: list[list[int]] | None = None
    pad_id: int = 0


# -- forward passes: backbone + head -> what the loss and predictions read ---------------------


def features_forward(mask_key: str) -> Callable[[nn.Module, nn.Module, Batch], Any]:
    def forward(backbone: nn.Module, head: nn.Module, batch: Batch) -> Any:
        segments = batch["token_type_ids"] if backbone.config.n_segments else None
        hidden = backbone.features(batch["input_ids"], batch["attention_mask"], segments)
        return head(hidden, batch[mask_key])

    return forward


def label_words_forward(backbone: nn.Module, head: nn.Module, batch: Batch) -> torch.Tensor:
    return head(backbone, batch["input_ids"], batch["attention_mask"])


# -- losses ----------------------------------------------------------------------------------------


def cross_entropy(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    return F.cross_entropy(logits, batch["label"])


def label_words_nll(scores: torch.Tensor, batch: Batch) -> torch.Tensor:
    """T5's loss on the target text: minus the log-likelihood of the gold label's words."""
    return -scores.gather(1, batch["label"][:, None]).mean()


def token_cross_entropy(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)


def span_loss(outputs: tuple[torch.Tensor, torch.Tensor], batch: Batch) -> torch.Tensor:
    start, end = outputs
    # -inf outside the context: fill with a finite floor so softmax stays defined at every position
    start, end = start.clamp(min=-1e4), end.clamp(min=-1e4)
    return (F.cross_entropy(start, batch["start"]) + F.cross_entropy(end, batch["end"])) / 2


def every_batch(batch: Batch) -> bool:
    return True


def answer_kept(batch: Batch) -> bool:
    """A validation question whose answer truncation cut off has no loss (it is still scored)."""
    return bool((batch["start"] >= 0).all())


# -- predictions: (predicted, gold) per example ----------------------------------------------------


def label_predictions(scores: torch.Tensor, batch: Batch, task: TaskConfig) -> tuple[list, list]:
    return scores.argmax(-1).tolist(), batch["label"].tolist()


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


# -- scores over a whole split -------------------------------------------------------------------


def label_scores(
    metrics: Sequence[str], predicted: list, gold: list, labels: Sequence[str], positive: int | None
) -> dict[str, float]:
    p, g = torch.tensor(predicted), torch.tensor(gold)
    return {name: LABEL_METRICS[name](p, g, len(labels), positive) for name in metrics}


def tag_scores(
    metrics: Sequence[str], predicted: list, gold: list, labels: Sequence[str], positive: int | None
) -> dict[str, float]:
    """Per-sentence lists of first-sub-word tag indices: token metrics over one flat sequence of
    words, entity metrics over each sentence's tag names."""
    per_token = [m for m in metrics if m not in ENTITY_SCORES]
    flat = [t for sentence in predicted for t in sentence], [t for sentence in gold for t in sentence]
    scores = label_scores(per_token, *flat, labels, positive) if per_token else {}
    per_entity = [m for m in metrics if m in ENTITY_SCORES]
    if per_entity:
        named = [[[labels[t] for t in sentence] for sentence in side] for side in (predicted, gold)]
        scores |= entity_scores(per_entity, *named)
    return {name: scores[name] for name in metrics}


def answer_scores(
    metrics: Sequence[str], predicted: list, gold: list, labels: Sequence[str], positive: int | None
) -> dict[str, float]:
    scores = squad_scores(predicted, gold)
    return {name: scores[name] for name in metrics}


# -- baselines on records: name -> (predicted, gold) in the form the scorer reads -----------------


def classification_baselines(train: list[Record], test: list[Record], labels: list[str], seed: int) -> dict:
    index = {label: i for i, label in enumerate(labels)}
    y_train = [index[r["label"]] for r in train]
    gold = [index[r["label"]] for r in test]
    pairs = "text_pair" in train[0]
    tfidf = baselines.tfidf_logreg(
        [r["text"] for r in train],
        y_train,
        [r["text"] for r in test],
        [r["text_pair"] for r in train] if pairs else None,
        [r["text_pair"] for r in test] if pairs else None,
        seed=seed,
    )
    return {"majority": (baselines.majority(y_train, len(test)), gold), "tfidf_logreg": (tfidf, gold)}


def tagging_baselines(train: list[Record], test: list[Record], labels: list[str], seed: int) -> dict:
    index = {label: i for i, label in enumerate(labels)}
    train_tags = [[index[t] for t in r["tags"]] for r in train]
    gold = [[index[t] for t in r["tags"]] for r in test]
    predicted = baselines.most_frequent_tag(
        [r["words"] for r in train], train_tags, [r["words"] for r in test]
    )
    return {"most_frequent_tag": (predicted, gold)}


def qa_baselines(train: list[Record], test: list[Record], labels: list[str], seed: int) -> dict:
    predicted = [baselines.overlap_sentence(r["question"], r["context"]) for r in test]
    return {"overlap_sentence": (predicted, [[r["answer_text"]] for r in test])}


# -- the registry -------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadSpec:
    build: Callable[[ModelConfig, HeadContext], nn.Module]
    forward: Callable[[nn.Module, nn.Module, Batch], Any]  # (backbone, head, batch) -> outputs
    loss: Callable[[Any, Batch], torch.Tensor]
    predictions: Callable[[Any, Batch, TaskConfig], tuple[list, list]]  # (predicted, gold) per example
    has_loss: Callable[[Batch], bool] = every_batch  # whether a validation batch has a defined loss


@dataclass(frozen=True)
class TaskSpec:
    heads: dict[Family, HeadSpec]  # the families that can learn this kind, and how
    # (metrics, predicted, gold, label names, index of the positive label) -> scores
    score: Callable[[Sequence[str], list, list, Sequence[str], int | None], dict[str, float]]
    baselines: Callable[[list[Record], list[Record], list[str], int], dict[str, tuple[list, list]]]


def sequence_head(pooling: Pooling) -> Callable[[ModelConfig, HeadContext], nn.Module]:
    return lambda m, c: SequenceHead(m.d_model, len(c.task.labels or ()), pooling, c.dropout)


def classify(pooling: Pooling) -> HeadSpec:
    return HeadSpec(
        sequence_head(pooling), features_forward("attention_mask"), cross_entropy, label_predictions
    )


TEXT_TO_TEXT = HeadSpec(
    build=lambda m, c: LabelWords(c.label_ids or [], c.pad_id),
    forward=label_words_forward,
    loss=label_words_nll,
    predictions=label_predictions,  # constrained decoding: the label whose words are most likely
)
TAG = HeadSpec(
    build=lambda m, c: TokenHead(m.d_model, len(c.task.labels or ()), c.dropout),
    forward=features_forward("attention_mask"),
    loss=token_cross_entropy,
    predictions=tag_predictions,
)
SPAN = HeadSpec(
    build=lambda m, c: SpanHead(m.d_model),
    forward=features_forward("context_mask"),
    loss=span_loss,
    predictions=span_predictions,
    has_loss=answer_kept,
)

TASKS: dict[Kind, TaskSpec] = {
    Kind.classification: TaskSpec(
        {
            Family.encoder: classify(Pooling.cls),
            Family.decoder: classify(Pooling.last),
            Family.encoder_decoder: TEXT_TO_TEXT,
        },
        label_scores,
        classification_baselines,
    ),
    Kind.pair_classification: TaskSpec(
        {Family.encoder: classify(Pooling.cls)}, label_scores, classification_baselines
    ),
    Kind.tagging: TaskSpec({Family.encoder: TAG, Family.decoder: TAG}, tag_scores, tagging_baselines),
    Kind.qa: TaskSpec({Family.encoder: SPAN}, answer_scores, qa_baselines),
}


def metric_names(task: TaskConfig) -> list[str]:
    return [getattr(m, "value", m) for m in task.metrics]


def score(task: TaskConfig, predicted: list, gold: list) -> dict[str, float]:
    """The task's metrics over a whole split's predictions."""
    labels = list(task.labels or ())
    positive = labels.index(task.positive_label) if task.positive_label is not None else None
    return TASKS[task.kind].score(metric_names(task), predicted, gold, labels, positive)
