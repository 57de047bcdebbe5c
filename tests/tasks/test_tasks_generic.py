"""Generic sources (local files, datasets' json builder): a new task needs only a yaml."""

from __future__ import annotations

import json
import random

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml
from lmforge.errors import ConfigError
from lmforge.tasks.config import Kind
from lmforge.tasks.records import example
from lmforge.tasks.splits import split_examples

SPLITS = ("train", "val", "test")


def test_example_yaml_builds_from_a_folder_and_reruns_byte_identically(tmp_path, repo, fixtures, read_jsonl):
    conf = group_yaml(repo / "conf" / "task" / "example_local.yaml")
    conf.params.path = str(fixtures / "local_folder")
    conf.out_dir = str(tmp_path / "out")
    result = entry_stage("task")(OmegaConf.create({"task": conf}))
    out = tmp_path / "out"
    assert [result.metrics[f"{s}_examples"] for s in SPLITS] == [6, 2, 2]  # val carved from 8 train rows
    test = read_jsonl(out / "test.jsonl")
    assert test[0] == {"id": "s1", "text": "Quietly brilliant.", "label": "positive"}
    card = json.loads((out / "card.json").read_text())
    assert card["counts"] == {"train": 6, "val": 2, "test": 2}
    assert sum(card["label_counts"]["train"].values()) == 6 and card["metrics"] == ["accuracy", "macro_f1"]
    assert "| positive |" in (out / "card.md").read_text()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    entry_stage("task")(OmegaConf.create({"task": conf}))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_one_jsonl_file_is_split_by_fraction_and_duplicates_dropped(tmp_path, task_cfg, read_jsonl):
    rows = [
        {"id": f"r{i}", "text": f"review number {i % 18}", "label": "pos" if i % 2 else "neg"}
        for i in range(20)
    ]
    path = tmp_path / "all.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = task_cfg(
        name="one_file",
        kind="classification",
        source="local",
        params={"path": str(path)},
        labels=["neg", "pos"],
        metrics=["accuracy"],
        val_fraction=0.2,
        test_fraction=0.2,
    )
    entry_stage("task")(cfg)
    splits = {s: read_jsonl(tmp_path / "out" / f"{s}.jsonl") for s in SPLITS}
    assert [len(splits[s]) for s in SPLITS] == [10, 4, 4]  # 18 unique texts
    assert (
        "Exact duplicate inputs dropped: 2 of 20 (0 of them with a different label"
        in (tmp_path / "out" / "card.md").read_text()
    )


def test_conll_tsv_tagging_and_hf_json_builder(tmp_path, task_cfg, fixtures, read_jsonl):
    tags = ["DET", "NOUN", "VERB", "ADV", "PRON", "."]
    entry_stage("task")(
        task_cfg(
            name="tags",
            kind="tagging",
            source="local",
            params={"path": str(fixtures / "tagging.tsv")},
            labels=tags,
            metrics=["token_accuracy"],
            val_fraction=0.2,
            test_fraction=0.2,
        )
    )
    records = [r for s in SPLITS for r in read_jsonl(tmp_path / "out" / f"{s}.jsonl")]
    assert {
        "id": "tagging:1",
        "words": ["The", "cat", "sat", "."],
        "tags": ["DET", "NOUN", "VERB", "."],
    } in records

    for split, rows in (("train", records[:3]), ("test", records[3:])):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    files = {s: str(tmp_path / f"{s}.jsonl") for s in ("train", "test")}
    params = {"path": "json", "data_files": files, "splits": {"train": "train", "test": "test"}}
    cfg = task_cfg(
        name="hf_tags",
        kind="tagging",
        source="hf",
        params=params,
        labels=tags,
        metrics=["token_accuracy"],
        val_fraction=0.34,
        out_dir=str(tmp_path / "hf"),
    )
    result = entry_stage("task")(cfg)
    assert [result.metrics[f"{s}_examples"] for s in SPLITS] == [2, 1, 2]
    assert read_jsonl(tmp_path / "hf" / "test.jsonl") == records[3:]


def test_hf_classification_pool(tmp_path, task_cfg, read_jsonl):
    rows = [{"sentence": f"text {i}", "y": i % 3} for i in range(10)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    params = {
        "path": "json",
        "data_files": {"train": str(tmp_path / "d.jsonl")},
        "fields": {"text": "sentence", "label": "y"},
    }
    entry_stage("task")(
        task_cfg(
            name="hf_cls",
            kind="classification",
            source="hf",
            params=params,
            labels=["0", "1", "2"],
            metrics=["accuracy"],
            val_fraction=0.2,
            test_fraction=0.2,
        )
    )
    test = read_jsonl(tmp_path / "out" / "test.jsonl")
    assert len(test) == 2 and all(r["id"].startswith("train:") and r["label"] in "012" for r in test)


def test_splits_are_seeded_whole_groups_and_independent_of_source_order():
    examples = [
        example(Kind.classification, group=f"doc{i // 3}", id=f"e{i}", text="t", label="a") for i in range(60)
    ]
    first = split_examples(examples, 0.1, 0.2, seed=7)
    shuffled = examples[:]
    random.Random(0).shuffle(shuffled)
    again = split_examples(shuffled, 0.1, 0.2, seed=7)
    assert {s: {e.record["id"] for e in first[s]} for s in SPLITS} == {
        s: {e.record["id"] for e in again[s]} for s in SPLITS
    }
    groups = {s: {e.group for e in first[s]} for s in SPLITS}
    assert not (groups["train"] & groups["test"]) and not (groups["val"] & groups["test"])
    assert (len(first["test"]), len(first["val"])) == (12, 6)
    assert split_examples(examples, 0.1, 0.2, seed=8)["test"] != first["test"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"source": "nope"}, "task.source='nope' is unknown; expected one of"),
        ({"metrics": ["exact_match"]}, "task.metrics=['exact_match'] do not apply to kind=classification"),
        ({"params": {"path": "x", "colour": 1}}, "invalid config task.params (local)"),
        ({"test_fraction": 1.5}, "task.test_fraction=1.5 is out of range"),
        ({"labels": ["a", "a"]}, "expected a non-empty list of distinct labels"),
        ({"kind": "qa"}, "task.labels=['a', 'b']; expected null for kind=qa"),
    ],
)
def test_bad_config_is_one_line(task_cfg, override, message):
    base = {
        "name": "t",
        "kind": "classification",
        "source": "local",
        "params": {"path": "x"},
        "labels": ["a", "b"],
        "metrics": ["accuracy"],
    }
    with pytest.raises(ConfigError) as err:
        entry_stage("task")(task_cfg(**{**base, **override}))
    assert message in str(err.value) and "\n" not in str(err.value)
