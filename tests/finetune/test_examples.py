"""Task records to features and batches, per kind, on a real WordPiece tokenizer."""

from __future__ import annotations

import pytest

from helpers import tiny_wordpiece
from lmforge.errors import DataError
from lmforge.finetune.examples import Collator, encode
from lmforge.finetune.spans import IGNORE_INDEX, span_text


def test_classification_and_pairs_truncate_the_end_and_carry_segments():
    records = [
        {"id": "a", "text": "the old tower is in paris .", "label": "pos"},
        {"id": "b", "text": "runs", "label": "neg"},
    ]
    encoded = encode("classification", records, tiny_wordpiece(), ["neg", "pos"], max_len=5, train=True)
    assert encoded.truncated == 1
    assert [f["label"] for f in encoded.features] == [1, 0]
    assert len(encoded.features[0]["input_ids"]) == 5  # [CLS] the old tower [SEP]
    pair = encode(
        "pair_classification",
        [{"text": "the tower", "text_pair": "in paris", "label": "1"}],
        tiny_wordpiece(),
        ["0", "1"],
        32,
        True,
    )
    assert pair.features[0]["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]


def test_head_tail_keeps_the_first_quarter_and_the_last_three_quarters():
    records = [
        {"id": "a", "text": "the old tower is in paris .", "label": "pos"},
        {"id": "b", "text": "runs", "label": "neg"},
    ]
    tok = tiny_wordpiece()
    whole = tok.encode(records[0]["text"]).ids  # [CLS] the old tower is in paris . [SEP]: 9 ids
    encoded = encode("classification", records, tok, ["neg", "pos"], 8, True, truncation="head_tail")
    assert encoded.truncated == 1
    assert encoded.features[0]["input_ids"] == whole[:2] + whole[-6:]  # [CLS] the | tower ... [SEP]
    assert encoded.features[1]["input_ids"] == tok.encode("runs").ids  # short inputs stay whole
    assert encoded.features[0]["token_type_ids"] == [0] * 8


def test_tagging_labels_first_sub_words_and_a_foreign_label_is_one_line():
    records = [{"id": "s1", "words": ["The", "unhappily", "runs"], "tags": ["DET", "ADV", "VERB"]}]
    tags = ["ADV", "DET", "VERB"]
    features = encode("tagging", records, tiny_wordpiece(), tags, 32, train=True).features
    assert features[0]["labels"] == [IGNORE_INDEX, 1, 0, IGNORE_INDEX, IGNORE_INDEX, 2, IGNORE_INDEX]
    with pytest.raises(
        DataError, match="record s1: label 'X' is not in the task's label set; expected one of: ADV"
    ):
        encode(
            "tagging", [{**records[0], "tags": ["DET", "X", "VERB"]}], tiny_wordpiece(), tags, 32, train=True
        )


def test_qa_spans_drop_cut_answers_in_training_only_and_collate():
    context = "The old tower is in Paris."
    answer = {"answer_text": "in Paris", "answer_start": context.index("in Paris")}
    record = {"id": "q", "question": "Where does the tower stand?", "context": context, **answer}
    full = encode("qa", [record], tiny_wordpiece(), [], 32, train=True).features[0]
    assert span_text(context, full["offsets"], full["start"], full["end"]) == "in Paris"
    cut_train = encode("qa", [record], tiny_wordpiece(), [], 12, train=True)
    cut_eval = encode("qa", [record], tiny_wordpiece(), [], 12, train=False)
    assert (cut_train.dropped, len(cut_train.features)) == (1, 0)
    assert cut_eval.features[0]["start"] == IGNORE_INDEX and cut_eval.features[0]["answers"] == ["in Paris"]
    batch = Collator(pad_id=0)([full, cut_eval.features[0]])
    assert batch["input_ids"].shape == (2, len(full["input_ids"]))
    assert batch["attention_mask"].sum(1).tolist() == [len(full["input_ids"]), 12]
    assert batch["context_mask"][1, 12:].any().item() is False
    assert batch["context"] == [context, context]
