"""KJV/WEB paraphrase pairs: OSIS cleaning on real verses as pysword returns them, balanced pairing."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from omegaconf import OmegaConf
from pysword import bible as pysword_bible
from pysword.books import BibleStructure

from helpers import entry_stage, group_yaml
from lmforge.corpora import bible as corpora_bible
from lmforge.corpora.bible import Module, clean_osis, load_verses
from lmforge.corpora.pin import Pin
from lmforge.tasks.sources import bible

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
    def fake_verses(module, cache):
        tag = module.module
        return {
            (b, c, v): f"{tag} {b} {c}:{v}"
            for b in ("Gen", "Exod", "Lev", "Num")
            for c in (1, 2, 3, 9)
            for v in (1, 2)
        }

    monkeypatch.setattr(bible, "load_verses", fake_verses)
    conf = group_yaml(repo / "conf" / "task" / "paraphrase.yaml")
    conf.out_dir, conf.cache_dir, conf.val_fraction, conf.test_fraction = (
        str(tmp_path / "out"),
        str(tmp_path),
        0.25,
        0.25,
    )
    entry_stage("task")(OmegaConf.create({"task": conf}))
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


def write_ztext(sword: Path, blocks: list[dict[tuple[str, int, int], str]]) -> None:
    """A zText SWORD module "Tiny" under `sword` (KJV versification, OT only): one zlib block per dict."""
    structure = BibleStructure("kjv", ["ot"])
    data = sword / "modules" / "texts" / "ztext" / "tiny"
    data.mkdir(parents=True)
    (sword / "mods.d").mkdir()
    (sword / "mods.d" / "tiny.conf").write_text(
        "[Tiny]\nDataPath=./modules/texts/ztext/tiny/\nModDrv=zText\nBlockType=BOOK\n"
        "CompressType=ZIP\nSourceType=OSIS\nVersification=KJV\nEncoding=UTF-8\n"
    )
    records: dict[int, bytes] = {}  # verse index -> (block, start, length)
    block_table, text = b"", b""
    for number, block in enumerate(blocks):
        raw = b""
        for (book, chapter, verse), osis in block.items():
            [index] = structure.ref_to_indicies(books=book, chapters=chapter, verses=verse)["ot"]
            records[index] = struct.pack("<IIH", number, len(raw), len(osis.encode()))
            raw += osis.encode()
        packed = zlib.compress(raw)
        block_table += struct.pack("<III", len(text), len(packed), len(raw))
        text += packed
    no_text = struct.pack("<IIH", 2**32 - 1, 0, 0)  # a block past the table: pysword reads ""
    (data / "ot.bzv").write_bytes(b"".join(records.get(i, no_text) for i in range(max(records) + 1)))
    (data / "ot.bzs").write_bytes(block_table)
    (data / "ot.bzz").write_bytes(text)


def test_load_verses_inflates_each_block_once(tmp_path, monkeypatch):
    genesis = {
        ("Genesis", 1, 1): '<w lemma="strong:H07225">In the beginning</w> God created the heaven.',
        ("Genesis", 1, 2): "And the earth was without form<note>Or, empty</note>.",
        ("Genesis", 1, 3): "And God said, Let there be light.",
    }
    exodus = {("Exodus", 1, 1): "Now these are the names.", ("Exodus", 1, 2): "Reuben, Simeon."}
    write_ztext(tmp_path / "usr" / "share" / "sword", [genesis, exodus])
    monkeypatch.setattr(corpora_bible, "apt_deb", lambda pin, cache: tmp_path / "tiny.deb")
    monkeypatch.setattr(corpora_bible, "unpack_deb", lambda deb: tmp_path)
    inflated = []
    real_decompress = zlib.decompress

    def counting_decompress(data: bytes) -> bytes:
        inflated.append(len(data))
        return real_decompress(data)

    monkeypatch.setattr(pysword_bible.zlib, "decompress", counting_decompress)

    verses = load_verses(Module(pin=Pin(package="tiny"), module="Tiny"), tmp_path)

    assert verses == {
        ("Gen", 1, 1): "In the beginning God created the heaven.",
        ("Gen", 1, 2): "And the earth was without form.",
        ("Gen", 1, 3): "And God said, Let there be light.",
        ("Exod", 1, 1): "Now these are the names.",
        ("Exod", 1, 2): "Reuben, Simeon.",
    }
    assert len(inflated) == 2  # one per block, not one per verse
