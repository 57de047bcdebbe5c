"""A fine-tuned checkpoint predicts on raw rows what its test score counted: saved as the stage saves
it and read back from the file, the Predictor of each task kind returns the label, tags or answer the
evaluation path predicts, and a model that learned its fixture returns every row's gold answer."""

from __future__ import annotations

import pytest
import torch
from finetune.test_module import OPTIM, fit, model_values, records
from torch.utils.data import DataLoader

from helpers import tiny_wordpiece
from lmforge.errors import DataError
from lmforge.finetune.examples import Collator, encode
from lmforge.finetune.module import FinetuneModule, evaluate
from lmforge.finetune.predict import Predictor, example
from lmforge.tasks.config import Kind, task_config

PAIRS = [("the old tower", "the tower runs"), ("paris is old", "where does paris stand")] * 2


def pair_records() -> tuple[list[dict], list[str]]:
    rows = [
        {"id": str(i), "text": a, "text_pair": b, "label": "same" if "tower" in a else "other"}
        for i, (a, b) in enumerate(PAIRS)
    ]
    return rows, ["other", "same"]


def module_and_rows(kind: str, family: str, metric: str) -> tuple[FinetuneModule, list[dict], list[str]]:
    torch.manual_seed(0)
    rows, labels = pair_records() if kind == "pair_classification" else records(kind)
    task = task_config(
        {"name": "t", "kind": kind, "source": "local", "labels": labels or None, "metrics": [metric]}
    )
    label_ids = [[5 + i, 3] for i in range(len(labels))]
    module = FinetuneModule(model_values(family), task, OPTIM, 60, head_dropout=0.0, label_ids=label_ids)
    return module, rows, labels


def saved(tmp_path, module: FinetuneModule) -> str:
    """The checkpoint as the stage writes it: plain hyperparameters and weights."""
    path = tmp_path / "best.ckpt"
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, path)
    return str(path)


def gold(kind: str, row: dict) -> str:
    if kind == "tagging":
        return " ".join(row["tags"])
    return row["answer_text"] if kind == "qa" else row["label"]


KINDS = [
    ("classification", "encoder", "accuracy"),
    ("classification", "encoder_decoder", "accuracy"),  # the label words T5 scores most likely
    ("pair_classification", "encoder", "accuracy"),
    ("tagging", "decoder", "token_accuracy"),
    ("qa", "encoder", "exact_match"),
]


@pytest.mark.parametrize("kind, family, metric", KINDS)
def test_raw_rows_get_the_predictions_the_test_score_counts(tmp_path, kind, family, metric):
    """From raw rows, the saved model predicts what the stage's evaluation path predicts on the
    task's records (a random model: its predictions vary), as names."""
    module, rows, labels = module_and_rows(kind, family, metric)
    features = encode(kind, rows, tiny_wordpiece(), labels, max_len=32, train=False).features
    _, (predicted, _) = module.eval().collect(Collator(pad_id=0)(features))
    if kind == "tagging":
        expected = [" ".join(labels[t] for t in tags) for tags in predicted]
    else:
        expected = predicted if kind == "qa" else [labels[p] for p in predicted]
    predictor = Predictor(saved(tmp_path, module), tiny_wordpiece())
    assert predictor.predict([example(Kind(kind), row) for row in rows]) == expected
    assert predictor.predict([]) == []
    chunked = Predictor(saved(tmp_path, module), tiny_wordpiece(), batch_size=2)  # 2 rows per forward
    assert len(rows) > 2 and chunked.predict([example(Kind(kind), row) for row in rows]) == expected


@pytest.mark.parametrize("kind, family, metric", [KINDS[3], KINDS[4]])
def test_a_model_that_learned_its_fixture_answers_each_row_as_the_gold(tmp_path, kind, family, metric):
    module, rows, labels = module_and_rows(kind, family, metric)
    features = encode(kind, rows, tiny_wordpiece(), labels, max_len=32, train=True).features
    loader = DataLoader(features, batch_size=4, collate_fn=Collator(pad_id=0))
    fit(module, loader, steps=60)
    assert evaluate(module, loader)[metric] == 1.0
    predictor = Predictor(saved(tmp_path, module), tiny_wordpiece())
    assert predictor.predict([example(Kind(kind), row) for row in rows]) == [gold(kind, row) for row in rows]


def test_an_input_row_is_the_columns_its_task_kind_reads():
    assert example(Kind.tagging, {"words": ["the", "tower"], "tags": ["O", "N"]}) == {"text": "the tower"}
    assert example(Kind.qa, {"question": "q?", "context": "c.", "answer_text": "c"}) == {
        "question": "q?",
        "context": "c.",
    }
    assert example(Kind.pair_classification, {"text": "a", "text_pair": "b", "label": "x"}) == {
        "text": "a",
        "text_pair": "b",
    }


def test_a_missing_column_is_one_line(tmp_path):
    module, _, _ = module_and_rows("pair_classification", "encoder", "accuracy")
    path = saved(tmp_path, module)
    with pytest.raises(DataError, match="input: no column 'text_pair' for task t; expected text, text_pair"):
        Predictor(path, tiny_wordpiece()).predict([{"text": "the old tower"}])
