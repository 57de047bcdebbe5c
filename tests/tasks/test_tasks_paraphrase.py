"""KJV/WEB paraphrase pairs: OSIS cleaning on real verses as pysword returns them, balanced pairing."""

from __future__ import annotations

import json

from omegaconf import OmegaConf

from lmforge.tasks.build import run
from lmforge.tasks.sources import bible
from lmforge.tasks.sources.bible import clean_osis

SPLITS = ("train", "val", "test")


def test_clean_osis_keeps_words_apart_and_drops_notes(fixtures):
    raw = json.loads((fixtures / "sword_verses.json").read_text(encoding="utf-8"))
    web, kjv = raw["web"], raw["kjv"]
    assert clean_osis(web["Gen.1.1"]) == "In the beginning, God created the heavens and the earth."
    assert clean_osis(web["Matt.1.1"]).startswith(
        "The book of the genealogy of Jesus Christ, the son of David"
    )
    assert clean_osis(kjv["Ps.23.1"]) == "A Psalm of David. The LORD is my shepherd; I shall not want."
    assert clean_osis(web["Ps.23.1"]) == "A Psalm by David. Yahweh is my shepherd; I shall lack nothing."
    assert "\\" not in clean_osis(kjv["Exod.6.3"]) and "my name JEHOVAH was" in clean_osis(kjv["Exod.6.3"])
    assert clean_osis(web["Rev.22.21"]).endswith("with all the saints. Amen.")  # the glossary is cut


def test_pairs_are_balanced_nearby_and_grouped_by_book(tmp_path, task_cfg, repo, read_jsonl, monkeypatch):
    def fake_verses(module, ctx):
        tag = module.module
        return {
            (b, c, v): f"{tag} {b} {c}:{v}"
            for b in ("Gen", "Exod", "Lev", "Num")
            for c in (1, 2, 3, 9)
            for v in (1, 2)
        }

    monkeypatch.setattr(bible, "load_verses", fake_verses)
    conf = OmegaConf.load(repo / "conf" / "task" / "paraphrase.yaml")
    conf.out_dir, conf.cache_dir, conf.val_fraction, conf.test_fraction = (
        str(tmp_path / "out"),
        str(tmp_path),
        0.25,
        0.25,
    )
    run(OmegaConf.create({"task": conf}))
    splits = {s: read_jsonl(tmp_path / "out" / f"{s}.jsonl") for s in SPLITS}
    records = [r for s in SPLITS for r in splits[s]]
    assert len(records) == 64 and sum(r["label"] == "1" for r in records) == 32
    for r in records:
        _, book, ref = r["text"].split()
        _, book2, ref2 = r["text_pair"].split()
        assert r["label"] == ("1" if ref == ref2 else "0") and book == book2
        assert abs(int(ref.split(":")[0]) - int(ref2.split(":")[0])) <= 2  # chapter 9 pairs only within 9
    books = {s: {r["id"].split(".")[0] for r in splits[s]} for s in SPLITS}
    assert all(not (books[a] & books[b]) for a, b in (("train", "val"), ("train", "test"), ("val", "test")))
