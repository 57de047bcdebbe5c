"""Bad records fail with one line before anything is written; earlier outputs survive."""

from __future__ import annotations

import json

import pytest

from helpers import entry_stage
from lmforge.errors import DataError
from lmforge.tasks.config import Kind
from lmforge.tasks.records import check, check_unique_ids


def _folder(tmp_path, test_rows, train_rows=None):
    folder = tmp_path / "src"
    folder.mkdir(exist_ok=True)
    train_rows = train_rows or [{"id": f"t{i}", "text": f"fine text {i}", "label": "a"} for i in range(6)]
    for split, rows in (("train", train_rows), ("test", test_rows)):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _cfg(task_cfg, folder):
    return task_cfg(
        name="v",
        kind="classification",
        source="local",
        params={"path": str(folder)},
        labels=["a", "b"],
        metrics=["accuracy"],
    )


@pytest.mark.parametrize(
    ("test_rows", "message"),
    [
        (
            [{"id": "x", "text": "ok", "label": "c"}],
            "task v: test record 'x' has label 'c'; expected one of ['a', 'b']",
        ),
        (
            [{"id": "x", "text": "  ", "label": "a"}],
            "task v: test record 'x' has text=''; expected a non-empty string",
        ),
        (
            [],
            "task v: source splits hold {'train': 6, 'val': 0, 'test': 0}; expected non-empty train and test",
        ),
        (
            [{"id": "t0", "text": "dup id", "label": "a"}],
            "id 't0' occurs in train and test; expected unique ids",
        ),
    ],
)
def test_bad_record_is_one_line_and_keeps_previous_outputs(tmp_path, task_cfg, test_rows, message):
    good = _folder(tmp_path, [{"id": "s", "text": "good", "label": "b"}])
    entry_stage("task")(_cfg(task_cfg, good))
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    bad = _folder(tmp_path, test_rows)
    with pytest.raises(DataError) as err:
        entry_stage("task")(_cfg(task_cfg, bad))
    assert message in str(err.value) and "\n" not in str(err.value)
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before


def test_qa_answer_must_be_a_span_of_its_context():
    good = {
        "id": "q",
        "question": "What is a cat?",
        "context": "a small feline",
        "answer_text": "small feline",
        "answer_start": 2,
    }
    check("qa", Kind.qa, None, "test", [good])
    with pytest.raises(
        DataError, match=r"context\[3:15\]='mall feline'; expected the answer to be that span"
    ):
        check("qa", Kind.qa, None, "test", [{**good, "answer_start": 3}])
    with pytest.raises(DataError, match="answer_start=-1; expected a character offset >= 0"):
        check("qa", Kind.qa, None, "test", [{**good, "answer_start": -1}])


def test_tagging_needs_one_known_tag_per_word():
    record = {"id": "s", "words": ["a", "b"], "tags": ["DET"]}
    with pytest.raises(DataError, match="has 2 words and tags="):
        check("pos", Kind.tagging, ["DET", "NOUN"], "train", [record])
    with pytest.raises(DataError, match="has tag 'nn'; expected one of"):
        check("pos", Kind.tagging, ["DET", "NOUN"], "train", [{**record, "tags": ["DET", "nn"]}])
    with pytest.raises(DataError, match="the val split is empty"):
        check("pos", Kind.tagging, ["DET"], "val", [])
    check_unique_ids("pos", {"train": [record], "test": [{**record, "id": "t"}]})
