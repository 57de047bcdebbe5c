"""Paraphrase pairs from two public-domain English Bibles: King James (1769) and World English Bible.

Source: the Debian packages `sword-text-kjv` and `sword-text-web`, fetched, pinned by sha256,
cached and read verse by verse by `lmforge.corpora.bible`. Verses are aligned by (book, chapter,
verse). Label "1": the two versions of the same verse; label "0": the KJV verse and the WEB text of
another verse of the same book at most `max_chapter_distance` chapters away. One positive and one
negative per aligned verse, so the set is balanced. Pairs are grouped by book: no verse text appears
in two splits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from lmforge.corpora.bible import LICENCE, Module, Verses, load_verses
from lmforge.tasks.records import example
from lmforge.tasks.sources import Context, Loaded


@dataclass
class BibleParams:
    first: Module = field(default_factory=Module)  # text
    second: Module = field(default_factory=Module)  # text_pair
    max_chapter_distance: int = 2  # negatives come from this many chapters either side (same book)


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
    first, second = load_verses(params.first, ctx.cache), load_verses(params.second, ctx.cache)
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
