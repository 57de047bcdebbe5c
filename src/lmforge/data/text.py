"""Text clean-up shared by every source: Unicode NFC, whitespace collapsing, invisible characters
dropped (and counted), sentence splitting, and the detokeniser that turns Brown's word tokens back
into natural text.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace and a
# capital, digit or opening quote. Crude on abbreviations ("Mr. Smith"), which is fine for pretraining.
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"'\u201d\u2019)\]]*)\s+(?=[\"'\u201c\u2018(\[]*[A-Z0-9])")
_PARAGRAPH = re.compile(r"\n\s*\n")

# Brown tokens that attach to the word before them / the word after them.
_NO_SPACE_BEFORE = frozenset({",", ".", ";", ":", "?", "!", ")", "]", "}", "%", "''", "'?'"})
_NO_SPACE_AFTER = frozenset({"(", "[", "{", "$", "``"})
_QUOTES = {"``": '"', "''": '"'}


def normalise(text: str) -> str:
    """Unicode NFC and every run of whitespace collapsed to one space, stripped at both ends."""
    return " ".join(unicodedata.normalize("NFC", text).split())


_WHITESPACE_CONTROLS = frozenset("\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85")  # str.split() treats them as spaces


def invisible_kind(char: str) -> str | None:
    """Why `char` is dropped from text, or None to keep it: a byte-order mark / zero-width no-break
    space (U+FEFF), a control character (NUL and the other C0/C1 controls that are not whitespace),
    or a lone surrogate (undecodable input kept by `errors=surrogateescape`-like readers)."""
    if char == "\ufeff":
        return "bom"
    category = unicodedata.category(char)
    if category == "Cc" and char not in _WHITESPACE_CONTROLS:
        return "control"
    if category == "Cs":
        return "surrogate"
    return None


def drop_invisible(text: str, counts: Counter) -> str:
    """`text` without the characters `invisible_kind` names, each one counted in `counts`."""
    if text.isprintable():  # the common case: nothing to drop (whitespace is handled elsewhere)
        return text
    kept = []
    for char in text:
        kind = invisible_kind(char)
        if kind is None:
            kept.append(char)
        else:
            counts[kind] += 1
    return "".join(kept)


def split_lines(text: str) -> list[str]:
    """One sentence per non-empty line."""
    return [s for s in (normalise(line) for line in text.splitlines()) if s]


def split_sentences(text: str) -> list[str]:
    """Paragraphs on blank lines (lines inside a paragraph are re-joined), then a regex splitter."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = normalise(paragraph)
        if not paragraph:
            continue
        pieces = _SENTENCE_END.split(paragraph)
        # split() with one capture group alternates text, closing-punctuation; glue them back.
        for i in range(0, len(pieces), 2):
            sentence = pieces[i] + (pieces[i + 1] if i + 1 < len(pieces) else "")
            if sentence.strip():
                sentences.append(sentence.strip())
    return sentences


def normalise_sentences(sentences: Iterable[str]) -> tuple[str, ...]:
    """Normalise each sentence and drop the ones left empty."""
    return tuple(s for s in (normalise(x) for x in sentences) if s)


def detokenise(words: Sequence[str]) -> str:
    """Join Brown word tokens into natural text: no space before , . ; etc., quotes hug their words.

    `` and '' become straight double quotes; a bare ' alternates between opening and closing; a full
    stop after an abbreviation's own full stop is dropped.
    """
    out: list[str] = []
    glue_next = True  # no space before the first word
    single_open = False
    for word in words:
        if word == "." and out and out[-1].endswith("."):
            continue  # "Jr." ending a sentence is followed by its own full stop in Brown
        text = _QUOTES.get(word, word)
        attach = glue_next or word in _NO_SPACE_BEFORE
        glue_next = word in _NO_SPACE_AFTER
        if word == "'":
            if single_open:
                attach = True
            else:
                glue_next = True
            single_open = not single_open
        out.append(text if attach else " " + text)
    return "".join(out)
