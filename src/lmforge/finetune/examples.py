"""Task records (the JSONL rows the task-data stage writes) -> token features -> padded batches.

One encoder per task kind, looked up in `ENCODERS`:

    classification       {"text", "label"}                       ids, type ids, label
    pair_classification  {"text", "text_pair", "label"}          ids with segments A/B, label
    tagging              {"words", "tags"}                       ids, per-token labels (first sub-word)
    qa                   {"question", "context", "answer_text",  ids with segments, start/end token,
                          "answer_start"}                        offsets and context mask for decoding

Texts longer than `max_len` keep their beginning: the tokenizer truncates the end (for pairs and QA,
the end of the second segment, the context), so a long news article is read from its headline on.
A single-text classification task may keep its head and tail instead (`task.truncation: head_tail`,
Sun et al. 2019: the first quarter of `max_len` tokens and the last three quarters, specials kept).
A training QA example whose answer was cut off is dropped (counted in `Encoded.dropped`); evaluation
keeps every question and scores what the model extracts from what it saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tokenizers import Tokenizer

from lmforge.errors import DataError
from lmforge.finetune.spans import IGNORE_INDEX, align_word_labels, answer_token_span
from lmforge.objectives.collate import pad

Record = dict[str, Any]
Feature = dict[str, Any]


@dataclass
class Encoded:
    features: list[Feature]
    dropped: int = 0  # training QA examples whose answer fell outside the kept tokens
    truncated: int = 0  # examples longer than max_len, cut at the end


def _tokenizer(tokenizer: Tokenizer, max_len: int, strategy: str) -> Tokenizer:
    tok = Tokenizer.from_str(tokenizer.to_str())  # a copy: truncation settings stay local
    tok.enable_truncation(max_length=max_len, strategy=strategy)
    tok.no_padding()
    return tok


def _label(labels: dict[str, int], value: Any, record: Record) -> int:
    if value not in labels:
        raise DataError(
            f"record {record.get('id', '?')}: label {value!r} is not in the task's label set; "
            f"expected one of: {', '.join(labels)}"
        )
    return labels[value]


def _ids(encoding) -> Feature:
    return {"input_ids": encoding.ids, "token_type_ids": encoding.type_ids}


def encode_classification(records, tok, labels, train) -> Encoded:
    features, truncated = [], 0
    for r in records:
        e = tok.encode(r["text"], r["text_pair"]) if "text_pair" in r else tok.encode(r["text"])
        truncated += bool(e.overflowing)
        features.append({**_ids(e), "label": _label(labels, r["label"], r)})
    return Encoded(features, truncated=truncated)


def head_tail(ids: list[int], max_len: int) -> list[int]:
    """The first quarter of `max_len` tokens and the last three quarters (all of `ids` when they fit)."""
    if len(ids) <= max_len:
        return ids
    head = max_len // 4
    return ids[:head] + ids[len(ids) - (max_len - head) :]


def encode_head_tail(records, tok, labels, train, max_len: int) -> Encoded:
    """Single texts cut in the middle: `tok` does not truncate, `head_tail` does."""
    features, truncated = [], 0
    for r in records:
        ids = tok.encode(r["text"]).ids
        truncated += len(ids) > max_len
        kept = head_tail(ids, max_len)
        features.append(
            {"input_ids": kept, "token_type_ids": [0] * len(kept), "label": _label(labels, r["label"], r)}
        )
    return Encoded(features, truncated=truncated)


def encode_tagging(records, tok, labels, train) -> Encoded:
    features, truncated = [], 0
    for r in records:
        e = tok.encode(r["words"], is_pretokenized=True)
        truncated += bool(e.overflowing)
        tags = [_label(labels, t, r) for t in r["tags"]]
        features.append({**_ids(e), "labels": align_word_labels(e.word_ids, tags)})
    return Encoded(features, truncated=truncated)


def encode_qa(records, tok, labels, train) -> Encoded:
    features, dropped, truncated = [], 0, 0
    for r in records:
        e = tok.encode(r["question"], r["context"])
        truncated += bool(e.overflowing)
        in_context = [s == 1 for s in e.sequence_ids]
        start = r["answer_start"]
        span = answer_token_span(e.offsets, in_context, start, start + len(r["answer_text"]))
        if span is None and train:
            dropped += 1
            continue
        features.append(
            {
                **_ids(e),
                "start": span[0] if span else IGNORE_INDEX,
                "end": span[1] if span else IGNORE_INDEX,
                "context_mask": in_context,
                "offsets": e.offsets,
                "context": r["context"],
                "answers": [r["answer_text"]],
            }
        )
    return Encoded(features, dropped=dropped, truncated=truncated)


# kind -> (encoder, truncation strategy): QA never cuts the question, only the context
ENCODERS: dict[str, tuple[Callable[[Sequence[Record], Tokenizer, dict, bool], Encoded], str]] = {
    "classification": (encode_classification, "longest_first"),
    "pair_classification": (encode_classification, "longest_first"),
    "tagging": (encode_tagging, "longest_first"),
    "qa": (encode_qa, "only_second"),
}


def encode(
    kind: str,
    records: Sequence[Record],
    tokenizer: Tokenizer,
    label_set: Sequence[str],
    max_len: int,
    train: bool,
    truncation: str = "head",
) -> Encoded:
    labels = {name: i for i, name in enumerate(label_set)}
    if truncation == "head_tail":  # TaskConfig allows it for single-text classification only
        whole = Tokenizer.from_str(tokenizer.to_str())
        whole.no_truncation()
        whole.no_padding()
        return encode_head_tail(records, whole, labels, train, max_len)
    encoder, strategy = ENCODERS[kind]
    return encoder(records, _tokenizer(tokenizer, max_len, strategy), labels, train)


@dataclass
class Collator:
    """Right-pads a list of features into tensors; per-token labels pad with IGNORE_INDEX."""

    pad_id: int
    keep: tuple[str, ...] = field(default=("offsets", "context", "answers"))  # passed through as lists

    def __call__(self, features: list[Feature]) -> dict[str, Any]:

        def padded(key: str, value: int) -> torch.Tensor:
            return pad([f[key] for f in features], value)[0]

        input_ids, mask = pad([f["input_ids"] for f in features], self.pad_id)
        batch: dict[str, Any] = {
            "input_ids": input_ids,
            "token_type_ids": padded("token_type_ids", 0),
            "attention_mask": mask.bool(),
        }
        first = features[0]
        if "label" in first:
            batch["label"] = torch.tensor([f["label"] for f in features])
        if "labels" in first:
            batch["labels"] = padded("labels", IGNORE_INDEX)
        if "start" in first:
            batch["start"] = torch.tensor([f["start"] for f in features])
            batch["end"] = torch.tensor([f["end"] for f in features])
            batch["context_mask"] = padded("context_mask", 0).bool()
        for key in self.keep:
            if key in first:
                batch[key] = [f[key] for f in features]
        return batch
