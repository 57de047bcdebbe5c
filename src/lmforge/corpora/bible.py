"""SWORD Bible modules from Debian packages, read verse by verse into clean text.

Each module's package is fetched with `apt-get download`, pinned by sha256 and unpacked with
`dpkg -x` into the cache (`lmforge.corpora.fetch`), then read with PyPI `pysword` (each compressed
block inflated once) using `clean=False`: its own cleaner glues words, so `clean_osis` drops notes
and non-canonical headings, removes inline tags without a space and structural ones with a space.
The paraphrase task, the pretraining mix and the translation pairs all read their Bibles here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from lmforge.corpora.fetch import apt_deb, unpack_deb
from lmforge.corpora.pin import Pin
from lmforge.errors import DataError

LICENCE = "KJV and WEB texts: public domain (CrossWire modules in Debian sword-text-kjv / sword-text-web)"
Verses = dict[tuple[str, int, int], str]  # (OSIS book, chapter, verse) -> clean text

_INLINE = r"(?:w|transChange|divineName|q|seg|foreign|name|hi|catchWord|rdg|speaker)"
_CLEAN_STEPS = (
    (re.compile(r"<note\b.*?</note>", re.S), " "),  # footnotes and cross references
    (re.compile(r'<title\b(?![^>]*canonical="true")[^>]*>.*?</title>', re.S), " "),  # editors' headings
    (re.compile(rf"</?{_INLINE}\b[^>]*>"), ""),  # word-level markup: no space
    (re.compile(r"<[^>]+>"), " "),  # line, paragraph and milestone markers separate words
    (re.compile(r"\\\+?[a-z]+\*?"), ""),  # USFM escapes left in the KJV text, e.g. "\\nd JEHOVAH"
    (re.compile(r"¶"), " "),
)


@dataclass
class Module:
    pin: Pin = field(default_factory=Pin)  # Debian package holding the SWORD module
    module: str = "???"  # SWORD module key, e.g. engKJV2006eb


def clean_osis(raw: str) -> str:
    """Plain verse text from a pysword `clean=False` OSIS verse."""
    text = raw.split("<chapter eID=")[0]  # what follows a chapter's end is not the verse (WEB's glossary)
    for pattern, replacement in _CLEAN_STEPS:
        text = pattern.sub(replacement, text)
    return re.sub(r" ([,.;:!?’”)])", r"\1", " ".join(text.split()))


def load_verses(module: Module, cache: Path) -> Verses:
    """Every verse with text in `module`, by (OSIS book, chapter, verse) in canonical order."""
    from pysword.modules import SwordModules  # only this source needs it

    root = unpack_deb(apt_deb(module.pin, cache)) / "usr" / "share" / "sword"
    modules = SwordModules(str(root))
    if module.module not in modules.parse_modules():
        raise DataError(
            f"{module.pin.package} holds no SWORD module {module.module!r}; expected it in mods.d"
        )
    bible = modules.get_bible_from_module(module.module)
    _keep_last_block(bible)
    verses: Verses = {}
    for books in bible.get_structure().get_books().values():
        for book in books:
            for chapter in range(1, book.num_chapters + 1):
                raws = bible.get_iter(books=[book.name], chapters=[chapter], clean=False)
                for verse, raw in enumerate(raws, start=1):
                    text = clean_osis(raw or "")
                    if text:
                        verses[(book.osis_name, chapter, verse)] = text
    return verses


def _keep_last_block(bible) -> None:
    """Inflate each compressed block once: pysword 0.2.8 inflates a zText verse's whole block per verse.

    Both modules use BlockType=BOOK, so reading verse by verse inflated each book once per verse (~77 s
    for the two Bibles). Verses are read in order, so the last block is the only one worth keeping.
    """
    from pysword.bible import ZTextModule

    if isinstance(bible, ZTextModule):  # raw-text modules have no blocks
        bible._decompressed_text = functools.lru_cache(maxsize=1)(bible._decompressed_text)
