"""data=mix on tiny hand-made fixtures in each raw format: nothing is fetched."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import struct
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml
from lmforge.corpora import fetch
from lmforge.data import card, mix
from lmforge.data.config import LARGE_COMPONENTS, MIX_COMPONENTS, data_config
from lmforge.data.documents import SPLITS, Document, read_split
from lmforge.data.formats import decode_gcide, gcide_entries, read_r_lazyload, rst_sentences
from lmforge.errors import ConfigError, DataError

CONF = Path(__file__).resolve().parents[2] / "conf" / "data"

# dictd's layout: header entries (one with a licence paragraph in column 0), then entries whose
# definitions and quotations are indented, each followed by a source marker.
GCIDE = """\

00-database-url
   ftp://ftp.gnu.org/gnu/gcide

00-database-info
   This file was converted from the original database.

GCIDE is free software; you can redistribute it and/or modify it.

Abuse \\A*buse"\\, v. t. [F. abuser.]
   1. To put to a wrong use; to misuse. [Obs.]
      [1913 Webster]

            The tellers of news abused the general.
                                                  --Macaulay.
      [1913 Webster]

Abusive \\A*bu"sive\\, a.
   Using harsh words. Rude.
   [WordNet 1.5 +PJC]

{Molluscoidea}, including Brachiopoda.

Acacia \\A*ca"cia\\, n.
   A tree. [Century Dict. 1906]
"""


def test_registry_has_one_loader_per_component():
    assert tuple(mix.LOADERS) == MIX_COMPONENTS + LARGE_COMPONENTS
    assert data_config(OmegaConf.create({"source": "mix"})).mix.components == list(MIX_COMPONENTS)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"components": ["brown", "gutenberg"]}, "unknown component 'gutenberg'"),
        ({"components": ["austen", "austen"]}, "without repeats"),
        ({"components": []}, "non-empty"),
        ({"webster_entries_per_document": 0}, "expected >= 1"),
        ({"glossary_entries_per_document": 0}, r"data.mix.glossary_entries_per_document=0; expected >= 1"),
        ({"sotu": {"sha256": "abc"}}, r"data.mix.sotu.sha256='abc'"),
        ({"austen": {"sha256": "abc"}}, r"data.mix.austen.sha256='abc'"),
        ({"django_docs": {"sha256": "ABC"}}, r"data.mix.django_docs.sha256='ABC'"),
        ({"webster": {"version": None}}, "invalid config data.mix.webster.version"),
    ],
)
def test_bad_mix_config_is_a_one_line_config_error(override, message):
    with pytest.raises(ConfigError, match=message) as info:
        data_config(OmegaConf.create({"source": "mix", "mix": override}))
    assert "\n" not in str(info.value)


def test_shipped_mix_config_validates(monkeypatch):
    monkeypatch.delenv("LMFORGE_CACHE", raising=False)
    cfg = data_config(group_yaml(CONF / "mix.yaml"))
    assert cfg.source.value == "mix" and cfg.prepared_dir == "data/mix/prepared"
    assert cfg.cache_dir == "~/.cache/lmforge" and (cfg.val_fraction, cfg.test_fraction) == (0.02, 0.02)
    assert cfg.mix.webster.package == "dict-gcide" and cfg.mix.webster_entries_per_document == 200
    assert (cfg.mix.django_docs.package, cfg.mix.django_docs.version) == ("Django", "5.2.8")
    assert cfg.brown == data_config(group_yaml(CONF / "brown.yaml")).brown


def test_gcide_entries_drop_header_and_source_markers():
    entries = gcide_entries(GCIDE)
    assert [headword for headword, _ in entries] == ["Abuse", "Abusive", "Acacia"]
    text = "\n".join(body for _, body in entries)
    assert "00-database" not in text and "GCIDE is free software" not in text
    assert "Webster]" not in text and "PJC" not in text and "Century" not in text
    assert "[Obs.]" in text and "[F. abuser.]" in text  # usage labels and etymologies are text
    assert "{Molluscoidea}" in entries[1][1]  # a column-0 line without a pronunciation continues an entry

    docs = mix.webster_documents(entries, per_document=2)
    assert [doc.id for doc in docs] == ["webster/0", "webster/1"]
    assert [doc.meta for doc in docs] == [
        {"first": "Abuse", "last": "Abusive"},
        {"first": "Acacia", "last": "Acacia"},
    ]
    assert docs[0].source == "webster"
    # each entry through the regex splitter: it also cuts after "v. t." and a sense number
    assert docs[0].sentences[:6] == (
        'Abuse \\A*buse"\\, v. t.',
        "[F. abuser.]",
        "1.",
        "To put to a wrong use; to misuse.",
        "[Obs.]",
        "The tellers of news abused the general. --Macaulay.",
    )
    assert docs[1].sentences == ('Acacia \\A*ca"cia\\, n.', "A tree.")


def test_gcide_stray_windows_1252_bytes_decode():
    assert decode_gcide(b"The stock market\x92s drop") == "The stock market\u2019s drop"
    assert decode_gcide("fa\u00e7ade".encode()) == "fa\u00e7ade"


AUSTEN = [
    "EMMA",
    "",
    "By Jane Austen",
    "",
    "VOLUME I",
    "",
    "CHAPTER I",
    "",
    "Emma Woodhouse, handsome, clever, and rich, seemed to unite some of the",
    "best blessings of existence. She had lived nearly twenty-one years.",
    "",
    "She was the youngest daughter.",
    "",
    "CHAPTER II",
    "",
    "Weston was a native of Highbury.",
    "",
    "VOLUME II",
    "",
    "CHAPTER I",
    "",
    "Emma could not forgive her.",
    "",
    "FINIS",
]


def test_austen_chapters_number_through_volumes_and_drop_headings():
    docs = mix.austen_documents("emma", AUSTEN)
    assert [doc.id for doc in docs] == ["austen/emma/0", "austen/emma/1", "austen/emma/2", "austen/emma/3"]
    assert docs[0].sentences == ("EMMA", "By Jane Austen")  # the title page
    assert docs[1].sentences == (
        "Emma Woodhouse, handsome, clever, and rich, seemed to unite some of the best blessings of existence.",
        "She had lived nearly twenty-one years.",
        "She was the youngest daughter.",
    )
    assert docs[3].sentences == ("Emma could not forgive her.", "FINIS")
    assert docs[3].meta == {"novel": "emma", "chapter": 3} and docs[3].source == "austen"


def _r_serialised(obj) -> bytes:
    """An R (XDR, version 3) serialisation of `obj`, written by rdata itself."""
    import tempfile

    import rdata

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "obj.rds"
        rdata.write_rds(path, obj)
        return gzip.decompress(path.read_bytes())


def test_r_lazyload_database_round_trip():
    novels = {"emma": np.array(AUSTEN[:3]), "persuasion": np.array(["Persuasion", "", "Chapter 1"])}
    rdb, variables = b"", {}
    for name, lines in novels.items():
        blob = zlib.compress(_r_serialised(lines))
        variables[name] = np.array([len(rdb), 4 + len(blob)], dtype=np.int32)
        rdb += struct.pack(">i", len(blob)) + blob
    rdx = gzip.compress(_r_serialised({"variables": variables, "compressed": True}))
    objects = read_r_lazyload(rdx, rdb, "fixture")
    assert list(objects) == ["emma", "persuasion"]
    assert [str(s) for s in objects["persuasion"]] == ["Persuasion", "", "Chapter 1"]
    with pytest.raises(DataError, match="fixture is not a readable R lazy-load database"):
        read_r_lazyload(rdx, rdb[:-5], "fixture")


RST = """\
.. _tut-if:

:keyword:`if` Statements
========================

Perhaps the most well-known statement is :keyword:`if`.  For
example::

   >>> x = 42
   >>> if x < 0:
   ...     x = 0

There can be zero or more parts. The keyword is short.

.. note::

   Notes are prose. They stay sentences.

.. code-block:: python

   def f(x):
       return x

>>> print("doctest")
doctest

Back to prose.
"""


def test_rst_prose_is_cut_into_sentences_and_code_kept_line_by_line():
    assert rst_sentences(RST) == [
        ".. _tut-if:",
        ":keyword:`if` Statements ========================",
        "Perhaps the most well-known statement is :keyword:`if`.",
        "For example::",
        ">>> x = 42",
        ">>> if x < 0:",
        "...     x = 0",
        "There can be zero or more parts.",
        "The keyword is short.",
        ".. note::",
        "Notes are prose.",
        "They stay sentences.",
        ".. code-block:: python",
        "def f(x):",
        "return x",
        '>>> print("doctest")',
        "doctest",
        "Back to prose.",
    ]


def _sdist(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _planted_django(tmp_path: Path, members: dict[str, bytes]):
    """A data config whose django_docs pin is an sdist planted in tmp_path/cache, as if fetched."""
    data = _sdist(members)
    folder = tmp_path / "cache" / "pip" / "Django-9.9"
    folder.mkdir(parents=True)
    (folder / "django-9.9.tar.gz").write_bytes(data)
    pin = {"version": "9.9", "sha256": hashlib.sha256(data).hexdigest()}
    return data_config(OmegaConf.create({"source": "mix", "mix": {"django_docs": pin}})), pin["sha256"]


def test_django_docs_are_the_rst_sources_in_the_sdist_read_in_place(tmp_path, monkeypatch):
    cfg, sha = _planted_django(
        tmp_path,
        {
            "django-9.9/docs/topics/if.txt": RST.encode(),
            "django-9.9/docs/index.txt": b"Django documentation\n====================\n\nStart here.\n",
            "django-9.9/docs/_theme/djangodocs/static/fontawesome/LICENSE.txt": b"Font Awesome Free License",
            "django-9.9/docs/requirements.txt": b"Sphinx>=4.5.0\n",
            "django-9.9/docs/conf.py": b"raise SystemExit('never run')\n",
            "django-9.9/django/contrib/admin/templates/note.txt": b"not documentation",
        },
    )
    monkeypatch.setattr(fetch, "_run", lambda *a: pytest.fail("a cached sdist must not be fetched again"))
    part = mix.LOADERS["django_docs"](cfg, tmp_path / "cache")
    assert [doc.id for doc in part.documents] == ["django_docs/index", "django_docs/topics/if"]
    assert {doc.source for doc in part.documents} == {"django_docs"}
    index, topic = part.documents
    assert index.sentences == ("Django documentation ====================", "Start here.")
    assert topic.sentences == tuple(rst_sentences(RST)) and topic.meta == {"path": "topics/if.txt"}
    assert part.provenance.startswith("PyPI Django==9.9 sdist (django-9.9.tar.gz; 2 docs/**/*.txt")
    assert f"sha256 {sha}" in part.provenance and "BSD-3-Clause" in part.provenance
    assert not (tmp_path / "cache" / "pip" / "Django-9.9.root").exists()  # nothing extracted


def test_django_docs_refuse_a_non_utf8_source_naming_it(tmp_path):
    cfg, _ = _planted_django(tmp_path, {"django-9.9/docs/ref/bad.txt": b"caf\xe9"})
    with pytest.raises(DataError, match=r"django-9.9.tar.gz:django-9.9/docs/ref/bad.txt is not valid UTF-8"):
        mix.LOADERS["django_docs"](cfg, tmp_path / "cache")


def test_bible_chapters_hold_their_verses_in_order():
    verses = {("Gen", 1, 1): "In the beginning.", ("Gen", 1, 2): "The earth.", ("Gen", 2, 1): "Finished."}
    docs = mix.bible_documents(verses)
    assert [(d.id, d.sentences) for d in docs] == [
        ("bible_web/Gen.1", ("In the beginning.", "The earth.")),
        ("bible_web/Gen.2", ("Finished.",)),
    ]
    assert docs[0].meta == {"book": "Gen", "chapter": 1} and docs[0].source == "bible_web"


def test_composition_numbers_add_up():
    doc = lambda i, source, *sentences: Document(f"{source}/{i}", source, sentences)  # noqa: E731
    splits = {
        "train": [
            doc(0, "a", "one two three.", "four."),
            doc(1, "b", "naïve café."),
            doc(2, "a", "five six."),
        ],
        "val": [doc(3, "b", "seven.")],
        "test": [doc(4, "a", "eight nine ten eleven.")],
    }
    numbers = card.metrics(tally(splits), 5, 0, {})
    for split in SPLITS:
        assert sum(numbers[f"source_{s}_{split}_documents"] for s in "ab") == numbers[f"{split}_documents"]
    total_words = sum(numbers[f"{split}_words"] for split in SPLITS)
    assert (numbers["source_a_words"], numbers["source_b_words"], total_words) == (10, 3, 13)
    assert numbers["source_b_chars"] == len("naïve café.") + len("seven.")  # characters, not bytes
    assert numbers["source_a_word_share"] + numbers["source_b_word_share"] == pytest.approx(1.0)
    rendered = card.render("tiny", {"source": "test"}, numbers, tally(splits), {}, ["a note"])
    assert "| a | 2 | 0 | 1 | 4 | 10 | 50 | 76.9% |" in rendered
    assert "| b | 1 | 1 | 0 | 2 | 3 | 17 | 23.1% |" in rendered
    assert "## Notes\n\n- a note\n" in rendered

    single = {
        split: [d for d in docs if d.source == "a"] or [doc(9, "a", "x.")] for split, docs in splits.items()
    }
    numbers = card.metrics(tally(single), 4, 0, {})
    assert not any(key.startswith("source_") for key in numbers)
    assert "Composition" not in card.render("tiny", {}, numbers, tally(single), {})


def tally(splits: dict[str, list[Document]]) -> card.Tally:
    """The card's counts of `splits`, documents added as prepare streams them: interleaved, so
    the order of the per-source table must come from the splits, train first, not from arrival."""
    counts = card.Tally()
    rows = [(split, doc) for split in SPLITS for doc in splits[split]]
    for split, doc in sorted(rows, key=lambda row: -SPLITS.index(row[0])):  # test first
        counts.add(split, doc)
    return counts


def test_mix_prepare_wires_components_ids_and_card(brown_cfg, monkeypatch):
    """Brown from the fake cached tarball, Austen from the fixture lines: ids, sources, card, metrics."""
    austen = mix.Part(mix.austen_documents("emma", AUSTEN), "austen provenance", "austen note")
    monkeypatch.setitem(mix.LOADERS, "austen", lambda cfg, cache: austen)
    brown_cfg.data.source = "mix"
    brown_cfg.data.mix = {"components": ["brown", "austen"]}
    result = entry_stage("prepare")(brown_cfg)

    docs = [d for s in SPLITS for d in read_split(brown_cfg.data.prepared_dir, s)]
    assert {d.id.split("/")[0] for d in docs} == {d.source for d in docs} == {"brown", "austen"}
    assert "brown/ca01" in {d.id for d in docs}
    assert result.metrics["source_austen_sentences"] == 8 and result.metrics["documents_total"] == 10
    reports = Path(brown_cfg.data.reports_dir)
    assert json.loads((reports / "data.json").read_text()) == result.metrics
    data_card = (reports / "data_card.md").read_text()
    assert (
        "- **source**: mix of brown, austen" in data_card and "- **austen**: austen provenance" in data_card
    )
    assert "- austen: austen note" in data_card and mix.KJV_NOTE in data_card
    assert "## Composition (by source, all splits)" in data_card
