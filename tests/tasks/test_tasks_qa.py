"""Extractive QA derived from WordNet glosses, on hand-written lines in the real data-file format."""

from __future__ import annotations

import json
import re

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml
from lmforge.corpora.fetch import cache_root
from lmforge.corpora.pin import Pin
from lmforge.errors import ConfigError, DataError
from lmforge.tasks.config import Kind
from lmforge.tasks.sources import Context, wordnet
from lmforge.tasks.sources.wordnet import derive, load_synsets, parse_data, sample

SPLITS = ("train", "val", "test")
KEPT = {  # id -> (question, answer) of every usable question in the fixture
    "n00002400-hypernym": ("What is a dog a kind of?", "canine"),
    "n00002700-hypernym": ("What is a fruit tree a kind of?", "tree"),
    "n00002900-hypernym": ("What is an apple tree a kind of?", "fruit tree"),  # not "tree" inside it
    "n00003000-instance": ("What is Yorktown an instance of?", "siege"),
    "n00003000-part": ("What is Yorktown part of?", "American Revolution"),
    "n00003300-hypernym": ("What is a thousand a kind of?", "cardinal number"),  # lemma "Cardinal_number"
    "v00033852-hypernym": ("To scowl is a way to do what?", "frown"),
}


def _qa_task(repo, tmp_path, monkeypatch, fixtures, **params):
    monkeypatch.setattr(wordnet, "data_folder", lambda params, ctx: fixtures / "wordnet")
    conf = group_yaml(repo / "conf" / "task" / "qa.yaml")
    conf.out_dir, conf.cache_dir = str(tmp_path / "out"), str(tmp_path / "cache")
    conf.params.update(params)
    return OmegaConf.create({"task": conf})


def test_data_lines_parse_words_pointers_and_gloss(fixtures):
    synsets = load_synsets(fixtures / "wordnet")
    assert len(synsets) == 20  # the two-space licence header lines are skipped
    thousand = synsets["n00003300"]
    assert len(thousand.words) == 10 and thousand.words[:2] == ("thousand", "one thousand")  # w_cnt 0a (hex)
    assert synsets["a00078329"].words == ("afeard",)  # adjective marker "(p)" dropped
    assert synsets["a00078329"].pointers == (("&", "a00077645"),)
    assert synsets["v00033852"].pointers == (("@", "v00032981"),)  # lexical "+" pointer and frames skipped
    assert synsets["v00033852"].gloss == 'frown with displeasure; "he scowled at the mess"'
    assert "  " not in synsets["n00002400"].gloss  # whitespace collapsed
    with pytest.raises(DataError, match=r"data.noun:1 is '00001740 03 n 02 entity 0 000 \| x'; expected"):
        parse_data("00001740 03 n 02 entity 0 000 | x\n", "n", "data.noun")  # says 2 words, has 1


def test_questions_ask_for_a_related_synset_whose_lemma_is_one_span_of_the_definition(fixtures):
    examples, counts = derive(load_synsets(fixtures / "wordnet"), Kind.qa)
    got = {ex.record["id"]: (ex.record["question"], ex.record["answer_text"]) for ex in examples}
    assert got == KEPT
    for ex in examples:
        r = ex.record
        assert r["context"][r["answer_start"] : r["answer_start"] + len(r["answer_text"])] == r["answer_text"]
        assert ex.group == r["id"].split("-")[0]  # grouped by synset: Yorktown's two questions together
    assert counts["hypernym", "candidates"] == 7  # canine, dog, ball, fruit tree, apple tree, thousand, scowl
    assert counts["hypernym", "ambiguous"] == 1  # canine: "carnivore" twice
    assert counts["hypernym", "headword"] == 1  # ball is a kind of "ball"
    # feline: "carnivore" only in the quoted example, so no candidate
    assert "n00002300-hypernym" not in got and "n00002200-hypernym" not in got


def test_cap_keeps_the_lowest_seeded_hashes_in_source_order(fixtures):
    examples, _ = derive(load_synsets(fixtures / "wordnet"), Kind.qa)
    ids = [ex.record["id"] for ex in examples]
    first = [ex.record["id"] for ex in sample(examples, 3, seed=0)]
    assert len(first) == 3 and first == [i for i in ids if i in first]  # a subset, in source order
    assert first == [ex.record["id"] for ex in sample(list(reversed(examples)), 3, seed=0)][::-1]
    assert any(sample(examples, 3, seed=s) != sample(examples, 3, seed=0) for s in range(1, 5))
    assert sample(examples, None, seed=0) == examples == sample(examples, 100, seed=0)


def test_qa_task_builds_splits_and_a_card_that_says_derived(
    tmp_path, repo, fixtures, monkeypatch, read_jsonl
):
    result = entry_stage("task")(_qa_task(repo, tmp_path, monkeypatch, fixtures))
    out = tmp_path / "out"
    splits = {s: read_jsonl(out / f"{s}.jsonl") for s in SPLITS}
    assert [result.metrics[f"{s}_examples"] for s in SPLITS] == [5, 1, 1]
    records = {r["id"]: r for s in SPLITS for r in splits[s]}
    assert {rid: (r["question"], r["answer_text"]) for rid, r in records.items()} == KEPT
    assert list(records["n00002400-hypernym"]) == ["id", "question", "context", "answer_text", "answer_start"]
    card = json.loads((out / "card.json").read_text())
    assert card["kind"] == "qa" and card["metrics"] == ["exact_match", "f1"] and card["labels"] == []
    assert card["notes"][0].startswith("DERIVED")
    assert (
        "Candidate questions: 9 (hypernym (@): 7 candidates, 1 ambiguous, 1 answer = headword"
        in (out / "card.md").read_text()
    )
    assert any(note.startswith("Usable questions: 7; kept 7 (") for note in card["notes"])
    assert any(
        note.endswith("headword (easy, e.g. 'squash ball' -> 'ball'): 1 of 7.") for note in card["notes"]
    )
    assert card["provenance"]["licence"].startswith("WordNet 3.0 licence")

    capped = entry_stage("task")(_qa_task(repo, tmp_path, monkeypatch, fixtures, max_examples=4))
    assert sum(capped.metrics.values()) == 4
    kept = [r["id"] for s in SPLITS for r in read_jsonl(out / f"{s}.jsonl")]
    examples, _ = derive(load_synsets(fixtures / "wordnet"), Kind.qa)
    assert sorted(kept) == sorted(ex.record["id"] for ex in sample(examples, 4, seed=0))


def test_max_examples_must_be_positive(tmp_path, repo, fixtures, monkeypatch):
    with pytest.raises(ConfigError, match=r"task.params.max_examples=0; expected >= 1 or null"):
        entry_stage("task")(_qa_task(repo, tmp_path, monkeypatch, fixtures, max_examples=0))


@pytest.mark.slow
def test_real_wordnet_base_gives_thousands_of_questions(repo, tmp_path):
    """Fetches Debian wordnet-base (6.5 MB) unless the cache of conf/task/qa.yaml already holds it."""
    conf = group_yaml(repo / "conf" / "task" / "qa.yaml")
    params = wordnet.WordNetQAParams(Pin(**conf.params.pin), conf.params.folder, None)
    ctx = Context("qa", Kind.qa, (), cache_root(conf.cache_dir), 0)
    synsets = load_synsets(wordnet.data_folder(params, ctx))
    assert len(synsets) == 117_659  # WordNet 3.0
    examples, counts = derive(synsets, Kind.qa)
    assert sum(n for (_, outcome), n in counts.items() if outcome == "candidates") > 1000
    assert len(examples) > 1000 and len(sample(examples, 6000, 0)) == 6000


@pytest.mark.parametrize(
    "text, lemma",
    [
        ("a dog, a Dog and a hot-dog; dogs", "dog"),
        ("Hot dog or hot_dog or hot dog2", "hot dog"),
        ("the U.S. and u.s.", "u.s."),
        ("dog-", "dog"),
        ("", "dog"),
        ("café au lait, Café", "café"),  # not ASCII: the regex path
    ],
)
def test_whole_word_matches_equal_the_regex_definition(text, lemma):
    pattern = rf"(?<![\w-]){re.escape(lemma)}(?![\w-])"
    expected = [(m.start(), m.end()) for m in re.finditer(pattern, text, re.IGNORECASE)]
    assert wordnet._matches(text, lemma) == expected
