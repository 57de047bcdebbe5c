"""Readers of the raw formats behind `data.source=mix` (see `lmforge.data.mix`).

- R lazy-load databases (`Rdata.rdx` + `Rdata.rdb`, how R packages ship their data sets), read with
  PyPI rdata;
- reStructuredText sources (Sphinx's `_sources/*.rst.txt`), kept as written: prose cut into
  sentences, literal blocks one line a sentence;
- the GCIDE dictionary as dictd serves it: entries, with the source markers dropped.
"""

from __future__ import annotations

import gzip
import re
import zlib
from typing import Any

from lmforge.data.text import split_sentences
from lmforge.errors import DataError


def read_r_lazyload(rdx: bytes, rdb: bytes, where: str) -> dict[str, Any]:
    """The objects of an R lazy-load database, by name (a character vector comes back as a numpy array).

    `Rdata.rdx` is gzip of an R-serialised index {"variables": {name: [offset, length]}, ...}; each
    object is `rdb[offset:offset + length]`: a 4-byte length header, then zlib of its serialisation.
    """
    import rdata  # only this format needs it

    def unserialise(data: bytes) -> Any:
        # extension=".rds": the bytes are a bare serialisation (rdata would guess so, with a warning)
        return rdata.conversion.convert(rdata.parser.parse_data(data, extension=".rds"))

    try:
        index = unserialise(gzip.decompress(rdx))["variables"]
        return {
            str(name): unserialise(zlib.decompress(rdb[int(offset) + 4 : int(offset) + int(length)]))
            for name, (offset, length) in index.items()
        }
    except Exception as err:  # gzip, zlib and rdata raise many unrelated types on a damaged file
        raise DataError(
            f"{where} is not a readable R lazy-load database ({type(err).__name__}: {err})"
        ) from None


# A literal block follows a paragraph ending in "::" (not a directive such as ".. note::") or a code
# directive; it is every following line indented deeper than the line that announced it.
_CODE_DIRECTIVE = re.compile(
    r"\.\.\s+(?:code-block|code|sourcecode|doctest|testcode|testsetup|testcleanup|testoutput|productionlist)::"
)


def _opens_literal_block(stripped: str) -> bool:
    return (stripped.endswith("::") and not stripped.startswith("..")) or bool(
        _CODE_DIRECTIVE.match(stripped)
    )


def rst_sentences(text: str) -> list[str]:
    """The sentences of a reST source with its markup kept: prose by `split_sentences`; literal blocks
    and doctest blocks (a paragraph starting with `>>>`) one non-blank line a sentence."""
    sentences: list[str] = []
    prose: list[str] = []
    opener: int | None = None  # indentation of a line that announced a literal block
    block: int | None = None  # inside a literal block: the indentation of its opener
    doctest = False

    def code(line: str) -> None:
        sentences.extend(split_sentences("\n".join(prose)))
        prose.clear()
        sentences.append(line)

    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if block is not None:
            if not stripped or indent > block:
                if stripped:
                    code(stripped)
                continue
            block = None
        if doctest:
            if stripped:
                code(stripped)
                continue
            doctest = False
        if opener is not None and stripped:
            if indent > opener:
                block = opener
            opener = None
            if block is not None:
                code(stripped)
                continue
        if stripped.startswith(">>>") and (not prose or not prose[-1].strip()):
            doctest = True
            code(stripped)
            continue
        prose.append(line)
        if _opens_literal_block(stripped):
            opener = indent
    sentences.extend(split_sentences("\n".join(prose)))
    return sentences


# Which source a definition came from: "[1913 Webster]", "[WordNet 1.5 +PJC]", "[Webster 1913 Suppl.]",
# "[Century Dict. 1906]" or an editor's initials ("[PJC]", "[RDH]", "[AS]"). Usage labels ("[Obs.]",
# "[Colloq.]") and etymologies ("[F. abuser; L. abusus ...]") are text and stay. In 0.48.5 this drops
# 227k markers; about 40 that lack a bracket ("WordNet 1.5]") stay.
_SOURCE_MARKER = re.compile(
    r"\[[^\[\]\n]*\b(?:Webster|WordNet|Century Dict(?:ionary)?|PJC|RDH)\b[^\[\]\n]*\]|\[(?:AS|GG|RP|JG|CM)\]"
)
HEADER_PREFIX = "00-database-"  # dictd's own entries: url, short and long name, info (licence notice)


def decode_gcide(raw: bytes) -> str:
    """gcide.dict is ASCII but for a few stray Windows-1252 bytes (0.48.5: three, e.g. 0x92 for ’)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


def gcide_entries(text: str) -> list[tuple[str, str]]:
    """(headword, text) of each dictionary entry in file order, source markers dropped, header left out.

    An entry starts at a line in column 0, after a blank line, that holds a pronunciation
    (`Abuse \\A*buse"\\, v. t. ...`) or names a header entry; definitions and quotations are indented.
    On dict-gcide 0.48.5 this finds 126,229 entry starts, all but 3 of them among the 126,240 of
    dictd's own index (gcide.index), which the rule needs not read.
    """
    entries: list[list[str]] = []
    blank = True
    for line in text.split("\n"):
        if blank and line[:1].strip() and ("\\" in line or line.startswith(HEADER_PREFIX)):
            entries.append([])
        if entries:
            entries[-1].append(line)
        blank = not line.strip()
    return [
        (lines[0].split("\\", 1)[0].strip(), _SOURCE_MARKER.sub("", "\n".join(lines)))
        for lines in entries
        if not lines[0].startswith(HEADER_PREFIX)
    ]
