"""Paraphrase pairs from two public-domain English Bibles: King James (1769) and World English Bible.

Source: the Debian packages `sword-text-kjv` and `sword-text-web` (`apt-get download`, pinned by
sha256, unpacked with `dpkg -x` into the cache), read verse by verse with PyPI `pysword` (each
compressed block inflated once) using `clean=False`: its own cleaner glues words, so `clean_osis`
drops notes and non-canonical headings, removes inline tags without a space and structural ones
with a space. Verses are aligned by (book, chapter, verse). Label "1": the two versions of the same
verse; label "0": the KJV verse and the WEB text of another verse of the same book at most
`max_chapter_distance` chapters away. One positive and one negative per aligned verse, so the set
is balanced. Pairs are grouped by book: no verse text appears in two splits.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass, field

from lmforge.errors import DataError
from lmforge.tasks.config import Pin
from lmforge.tasks.fetch import apt_deb, unpack_deb
from lmforge.tasks.records import example
from lmforge.tasks.sources import Context, Loaded

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


@dataclass
class BibleParams:
    first: Module = field(default_factory=Module)  # text
    second: Module = field(default_factory=Module)  # text_pair
    max_chapter_distance: int = 2  # negatives come from this many chapters either side (same book)


def clean_osis(raw: str) -> str:
    """Plain verse text from a pysword `clean=False` OSIS verse."""
    text = raw.split("<chapter eID=")[0]  # what follows a chapter's end is not the verse (WEB's glossary)
    for pattern, replacement in _CLEAN_STEPS:
        text = pattern.sub(replacement, text)
    return re.sub(r" ([,.;:!?’”)])", r"\1", " ".join(text.split()))


def load_verses(module: Module, ctx: Context) -> Verses:
    from pysword.modules import SwordModules  # only this source needs it

    root = unpack_deb(apt_deb(module.pin, ctx.cache)) / "usr" / "share" / "sword"
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


def pairs(first: Verses, second: Verses, max_distance: int, seed: int, ctx: Context) -> list:
    """One positive and one nearby negative per verse present in both versions, in canonical order."""
    refs = [ref for ref in first if ref in second]
    by_book: dict[str, list[tuple[str, int, int]]] = {}
    for ref in refs:
        by_book.setdefault(ref[0], []).append(ref)
    window: dict[tuple[str, int], list[tuple[str, int, int]]] = {}  # (book, chapter) -> refs in reach
    examples = []
    for ref in refs:
        book, chapter, verse = ref
        if (book, chapter) not in window:  # once per chapter, not per verse: Psalms has 2,461 verses
            window[book, chapter] = [r for r in by_book[book] if abs(r[1] - chapter) <= max_distance]
        near = [r for r in window[book, chapter] if r != ref]
        if not near:
            continue
        other = random.Random(f"{seed}:{book}.{chapter}.{verse}").choice(near)
        rid = f"{book}.{chapter}.{verse}"
        examples.append(
            example(ctx.kind, group=book, id=f"{rid}+", text=first[ref], text_pair=second[ref], label="1")
        )
        other_id = f"{other[0]}.{other[1]}.{other[2]}"
        examples.append(
            example(
                ctx.kind,
                group=book,
                id=f"{rid}-{other_id}",
                text=first[ref],
                text_pair=second[other],
                label="0",
            )
        )
    return examples


def read(params: BibleParams, ctx: Context) -> Loaded:
    first, second = load_verses(params.first, ctx), load_verses(params.second, ctx)
    examples = pairs(first, second, params.max_chapter_distance, ctx.seed, ctx)
    common = sum(ref in second for ref in first)
    provenance = {
        "source": f"Debian {params.first.pin.package}={params.first.pin.version} ({params.first.module}) and "
        f"{params.second.pin.package}={params.second.pin.version} ({params.second.module}), read with pysword",
        "sha256": f"{params.first.pin.sha256} / {params.second.pin.sha256}",
        "licence": LICENCE,
    }
    notes = [
        f"DERIVED pairs. Verses with text: {len(first)} ({params.first.module}), {len(second)} "
        f"({params.second.module}); aligned by reference: {common}.",
        f'Label "1": both versions of one verse; label "0": the {params.first.module} verse with the '
        f"{params.second.module} text of another verse of the same book within {params.max_chapter_distance} "
        "chapters (seeded choice). One of each per aligned verse: balanced.",
        "Markup: notes and non-canonical headings dropped, tags stripped, text after a chapter's end "
        "marker dropped (WEB appends its glossary to Rev 22:21).",
        "Grouped by book: every verse text stays within one split.",
        "Versifications differ (KJV vs NRSVA): a few aligned verses differ in extent (WEB Rom 14:23 "
        "carries the doxology KJV has as Rom 16:25-27).",
    ]
    return Loaded(pool=examples, provenance=provenance, notes=notes)
