"""A fine-tuned checkpoint that predicts on raw inputs, as the stage scored it (the MLflow model of
each fine-tuning row: `lmforge.serving` hands it its rows).

The columns of a row depend on the task kind, and so does what comes back, one string per row:

    classification       text                 the label
    pair_classification  text, text_pair      the label
    tagging              text                 a tag per whitespace-separated word, space-separated
    qa                   question, context    the answer, a span of the context

Inputs go through the task's own encoder (`lmforge.finetune.examples.encode`: the same truncation
and special tokens as in training) and predictions through its head's (`TASKS[kind]`), so a label
predicted here is the one the test score counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tokenizers import Tokenizer

from lmforge.errors import DataError
from lmforge.finetune.examples import Collator, encode
from lmforge.finetune.module import FinetuneModule
from lmforge.tasks.config import Kind
from lmforge.training.checkpoints import check_weights, read_checkpoint

COLUMNS: dict[Kind, tuple[str, ...]] = {
    Kind.classification: ("text",),
    Kind.pair_classification: ("text", "text_pair"),
    Kind.tagging: ("text",),
    Kind.qa: ("question", "context"),
}


def example(kind: Kind, record: Mapping[str, Any]) -> dict[str, str]:
    """A task record (the task stage's JSONL row) as the model's input row."""
    if kind is Kind.tagging:
        return {"text": " ".join(record["words"])}
    return {column: str(record[column]) for column in COLUMNS[kind]}


class Predictor:
    """`predict(rows)`: one string per row, computed `batch_size` rows at a time (a caller's 10,000
    rows never become one padded batch)."""

    def __init__(self, checkpoint: str, tokenizer: Tokenizer, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size: got {batch_size}, expected an integer >= 1")
        saved = read_checkpoint(checkpoint)  # weights_only=True
        module = FinetuneModule.from_hparams(saved["hyper_parameters"])
        check_weights(module, saved, checkpoint)
        self.module = module.eval()
        self.task = module.task
        self.labels = list(self.task.labels or ())
        self.tokenizer = tokenizer
        self.max_len = min(self.task.max_len, module.model_config.max_seq_len)
        self.collate = Collator(pad_id=saved["hyper_parameters"].get("pad_id", 0))
        self.batch_size = batch_size

    @property
    def columns(self) -> tuple[str, ...]:
        return COLUMNS[self.task.kind]

    def _record(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """An input row as a task record, its gold fields filled with placeholders (not read)."""
        missing = [c for c in self.columns if c not in row]
        if missing:
            raise DataError(
                f"input: no column {missing[0]!r} for task {self.task.name}; expected {', '.join(self.columns)}"
            )
        kind, first = self.task.kind, self.labels[0] if self.labels else None
        if kind is Kind.tagging:
            words = str(row["text"]).split()
            return {"words": words, "tags": [first] * len(words)}
        if kind is Kind.qa:
            return {
                "question": str(row["question"]),
                "context": str(row["context"]),
                "answer_text": "",
                "answer_start": 0,
            }
        return {**{c: str(row[c]) for c in self.columns}, "label": first}

    @torch.no_grad()
    def predict(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        if not rows:
            return []
        records = [self._record(row) for row in rows]
        features = encode(
            self.task.kind.value, records, self.tokenizer, self.labels, self.max_len, train=False,
            truncation=self.task.truncation,
        ).features  # fmt: skip
        predicted: list = []  # one feature per record: encode(train=False) drops none
        for start in range(0, len(features), self.batch_size):
            _, (chunk, _) = self.module.collect(self.collate(features[start : start + self.batch_size]))
            predicted += chunk
        if self.task.kind is Kind.qa:
            return [str(answer) for answer in predicted]
        if self.task.kind is Kind.tagging:
            return [" ".join(self.labels[t] for t in tags) for tags in predicted]
        return [self.labels[p] for p in predicted]
