"""`data.source=mix`: several real texts concatenated as documents, a corpus big enough for scaling sweeps.

Each component is fetched with its ordinary client, pinned by version and sha256 and cached
(`lmforge.data.brown.fetch`; `apt-get download` + `dpkg -x` through `lmforge.tasks.fetch`), so a
rerun fetches nothing. A document's `source` is its component, its id starts with it ("austen/emma/12").

    brown        the Brown Corpus (`lmforge.data.brown`): one document per file
    bible_web    World English Bible (Debian sword-text-web, read by the paraphrase task's
                 `lmforge.tasks.sources.bible.load_verses`): one document per chapter, a verse a sentence
    austen       Jane Austen's six novels (Debian r-cran-janeaustenr, an R lazy-load database):
                 one document per chapter, paragraphs cut by `split_sentences`
    python_docs  the Python 3.11 documentation's reST sources (Debian python3.11-doc): one document
                 per file, markup kept; prose cut by `split_sentences`, code one line a sentence
    webster      Webster's Revised Unabridged Dictionary (1913) as extended by GCIDE (Debian
                 dict-gcide): source markers dropped, `webster_entries_per_document` entries a document

The King James Bible is left out on purpose (see KJV_NOTE).
"""

from __future__ import annotations

import dataclasses
import gzip
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from lmforge.data import brown
from lmforge.data.config import DataConfig, DebianPin
from lmforge.data.documents import Document
from lmforge.data.formats import decode_gcide, gcide_entries, read_r_lazyload, rst_sentences
from lmforge.data.text import split_sentences
from lmforge.errors import DataError
from lmforge.tasks.config import Kind, Pin
from lmforge.tasks.fetch import apt_deb, unpack_deb
from lmforge.tasks.sources import Context
from lmforge.tasks.sources.bible import Module, Verses, load_verses

KJV_NOTE = (
    "The King James Bible (Debian sword-text-kjv) is left out on purpose: it is the World English "
    "Bible's text verse by verse in older words, so it would repeat data and leak across splits."
)
AUSTEN_HEADING = re.compile(r"(?i:chapter|volume)\s+[IVXLCivxlc\d]+\.?")  # "CHAPTER XLVII", "Chapter 1"


class Part(NamedTuple):
    documents: list[Document]  # in source order
    provenance: str  # package, version, sha256 and licence, one line for the data card
    note: str  # how the text was cut into documents and sentences, and what was dropped


def load(cfg: DataConfig, cache: Path) -> tuple[list[Document], dict[str, str], list[str]]:
    """The documents of every configured component in order, provenance per component, and notes."""
    documents: list[Document] = []
    provenance = {"source": "mix of " + ", ".join(cfg.mix.components)}
    notes = []
    for name in cfg.mix.components:
        part = LOADERS[name](cfg, cache)
        documents += part.documents
        provenance[name] = part.provenance
        notes.append(f"{name}: {part.note}")
    return documents, provenance, [*notes, KJV_NOTE]


def _unpacked(pin: DebianPin, cache: Path) -> Path:
    """The root of the verified, cached .deb unpacked with `dpkg -x`."""
    return unpack_deb(apt_deb(Pin(pin.package, pin.version, pin.sha256), cache))


def _debian(pin: DebianPin, how: str, licence: str) -> str:
    return f"Debian {pin.package}={pin.version} ({how}), sha256 {pin.sha256}; licence: {licence}"


def load_brown(cfg: DataConfig, cache: Path) -> Part:
    docs, provenance = brown.load(cfg.brown, cache)
    docs = [dataclasses.replace(doc, id=f"brown/{doc.id}") for doc in docs]
    line = f"{provenance['source']}, sha256 {provenance['sha256']}; licence: {provenance['licence']}"
    return Part(docs, line, "one document per Brown file, as data=brown prepares it.")


def bible_documents(verses: Verses) -> list[Document]:
    """One document per (book, chapter) in canonical order; each verse a sentence."""
    chapters: dict[tuple[str, int], list[str]] = {}
    for (book, chapter, _verse), text in verses.items():
        chapters.setdefault((book, chapter), []).append(text)
    return [
        Document(f"bible_web/{book}.{chapter}", "bible_web", tuple(texts), {"book": book, "chapter": chapter})
        for (book, chapter), texts in chapters.items()
    ]


def load_bible_web(cfg: DataConfig, cache: Path) -> Part:
    pin = cfg.mix.bible_web
    module = Module(Pin(pin.package, pin.version, pin.sha256), cfg.mix.bible_module)
    verses = load_verses(module, Context("mix", Kind.classification, (), cache, cfg.seed))
    how = f"SWORD module {cfg.mix.bible_module}, read with pysword"
    note = (
        "one document per chapter (book and chapter, e.g. bible_web/Gen.1), one sentence per verse; "
        "notes and editors' headings dropped, tags stripped (the paraphrase task's reader)."
    )
    return Part(bible_documents(verses), _debian(pin, how, "public domain (World English Bible)"), note)


def austen_documents(novel: str, lines: list[str]) -> list[Document]:
    """One document per chapter, numbered from 1 in reading order (Emma's volumes do not restart it);
    what precedes the first chapter (title page, Northanger Abbey's advertisement) is document 0.
    Chapter and volume headings are dropped; paragraphs (blank-line separated) are cut into sentences."""
    chapters: list[list[str]] = [[]]
    for line in lines:
        heading = line.strip()
        if AUSTEN_HEADING.fullmatch(heading):
            if heading.lower().startswith("chapter"):
                chapters.append([])
            continue
        chapters[-1].append(line)
    docs = []
    for number, chapter in enumerate(chapters):
        sentences = split_sentences("\n".join(chapter))
        if sentences:
            meta = {"novel": novel, "chapter": number}
            docs.append(Document(f"austen/{novel}/{number}", "austen", tuple(sentences), meta))
    return docs


def load_austen(cfg: DataConfig, cache: Path) -> Part:
    pin = cfg.mix.austen
    data = _unpacked(pin, cache) / "usr/lib/R/site-library/janeaustenr/data"
    if not (data / "Rdata.rdx").is_file() or not (data / "Rdata.rdb").is_file():
        raise DataError(f"{data} holds no Rdata.rdx / Rdata.rdb; expected {pin.package}'s R data sets")
    novels = read_r_lazyload((data / "Rdata.rdx").read_bytes(), (data / "Rdata.rdb").read_bytes(), str(data))
    docs = [
        doc for novel, lines in novels.items() for doc in austen_documents(novel, [str(s) for s in lines])
    ]
    licence = "the novels (1811-1818) are public domain; the janeaustenr package is MIT (Julia Silge)"
    note = (
        "one document per chapter (austen/<novel>/<n>, numbered through each novel; the title page is "
        "document 0), chapter and volume headings dropped, wrapped lines joined, paragraphs cut by the "
        "regex sentence splitter."
    )
    return Part(docs, _debian(pin, "R data sets read with PyPI rdata", licence), note)


def load_python_docs(cfg: DataConfig, cache: Path) -> Part:
    pin = cfg.mix.python_docs
    sources = _unpacked(pin, cache) / "usr/share/doc" / pin.package.removesuffix("-doc") / "html/_sources"
    files = sorted(sources.rglob("*.rst.txt"))
    if not files:
        raise DataError(f"{sources} holds no *.rst.txt files; expected the Sphinx sources of {pin.package}")
    docs = []
    for path in files:
        rel = path.relative_to(sources).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"{path} is not valid UTF-8 (byte {err.start}); expected UTF-8 reST") from None
        doc_id = f"python_docs/{rel.removesuffix('.rst.txt')}"
        docs.append(Document(doc_id, "python_docs", tuple(rst_sentences(text)), {"path": rel}))
    licence = (
        "PSF License Agreement (the Python documentation); its code examples also Zero-Clause BSD "
        "(license.rst)"
    )
    note = (
        "one document per reST source file, markup kept as written; prose cut by the regex sentence "
        "splitter; literal blocks (after '::' or a code directive) and '>>>' blocks one line a sentence, "
        "their indentation collapsed like all whitespace."
    )
    return Part(docs, _debian(pin, f"{len(files)} _sources/**/*.rst.txt files", licence), note)


def webster_documents(entries: list[tuple[str, str]], per_document: int) -> list[Document]:
    """`per_document` consecutive entries a document (the split unit), sentences cut per entry."""
    docs = []
    for number, start in enumerate(range(0, len(entries), per_document)):
        group = entries[start : start + per_document]
        sentences = tuple(s for _headword, text in group for s in split_sentences(text))
        meta = {"first": group[0][0], "last": group[-1][0]}
        docs.append(Document(f"webster/{number}", "webster", sentences, meta))
    return docs


def load_webster(cfg: DataConfig, cache: Path) -> Part:
    pin = cfg.mix.webster
    path = _unpacked(pin, cache) / "usr/share/dictd/gcide.dict.dz"
    try:
        text = decode_gcide(gzip.decompress(path.read_bytes()))  # dictzip is gzip with a seek table
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"{path} is not a readable dictzip file ({err})") from None
    entries = gcide_entries(text)
    licence = (
        "GNU GPL v2 or later (GCIDE, usr/share/doc/dict-gcide/copyright); NOT public domain, although "
        "its 1913 Webster base text is"
    )
    note = (
        f"{len(entries)} dictionary entries in file order, {cfg.mix.webster_entries_per_document} a "
        "document (webster/<n>); dictd's 00-database-* header entries and the source markers "
        "([1913 Webster], [WordNet 1.5], [PJC], ...) dropped, pronunciation and markup kept; each "
        "entry cut by the regex sentence splitter."
    )
    docs = webster_documents(entries, cfg.mix.webster_entries_per_document)
    return Part(docs, _debian(pin, "gcide.dict.dz", licence), note)


# One loader per component of `lmforge.data.config.MIX_COMPONENTS`.
LOADERS: dict[str, Callable[[DataConfig, Path], Part]] = {
    "brown": load_brown,
    "bible_web": load_bible_web,
    "austen": load_austen,
    "python_docs": load_python_docs,
    "webster": load_webster,
}
