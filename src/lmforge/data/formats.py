"""Readers of the raw formats behind `data.source=mix` (see `lmforge.data.mix`).

- R lazy-load databases (`Rdata.rdx` + `Rdata.rdb`, how R packages ship their data sets), read with
  PyPI rdata;
- reStructuredText sources (Sphinx's `_sources/*.rst.txt`), kept as written: prose cut into
  sentences, literal blocks one line a sentence;
- the GCIDE dictionary as dictd serves it: entries, with the source markers dropped;
- any dictd database (`<name>.index` + `<name>.dict.dz`): its entries through its own index;
- SWORD commentary modules (zCom, zCom4): each compressed block's text, markup stripped;
- manual pages (roff with the man macros): the text a reader sees, without the formatting.
"""

from __future__ import annotations

import gzip
import re
import struct
import zlib
from pathlib import Path
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
_DICTD_HEADER = re.compile(
    r"00-?database"
)  # those entries in every dictd database ("00databaseurl" in older ones)


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


DICTD_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"  # dictd's base-64 numbers


def _dictd_number(digits: str, where: str) -> int:
    value = 0
    for digit in digits:
        position = DICTD_DIGITS.find(digit)
        if position < 0:
            raise DataError(f"{where}: {digits!r} is not a dictd base-64 number")
        value = value * 64 + position
    return value


def dictd_entries(index: str, text: bytes, where: str) -> list[tuple[str, str]]:
    """(headword, text) of each entry of a dictd database in the order its text stands in the file.

    `index` is `<name>.index` (a line per headword: headword, offset and length in base 64, tab
    separated), `text` the inflated `<name>.dict`. Headwords that share one entry (a synonym, an
    abbreviation) yield it once, under the first; dictd's own `00-database-*` (`00database*`) entries are left out.
    """
    spans: dict[tuple[int, int], str] = {}
    for number, line in enumerate(index.splitlines(), start=1):
        fields = line.split("\t")
        if len(fields) < 3:
            raise DataError(f"{where}:{number} holds {line!r}; expected headword, offset and length")
        span = (_dictd_number(fields[1], f"{where}:{number}"), _dictd_number(fields[2], f"{where}:{number}"))
        if span[0] + span[1] > len(text):
            raise DataError(
                f"{where}:{number}: entry {fields[0]!r} ends past the dictionary's {len(text)} bytes"
            )
        if not _DICTD_HEADER.match(fields[0]):
            spans.setdefault(span, fields[0])
    return [
        (headword, text[start : start + length].decode("utf-8", errors="replace"))
        for (start, length), headword in sorted(spans.items())
    ]


def read_dictd(folder: Path, name: str) -> list[tuple[str, str]]:
    """The entries of dictd database `name` in `folder` (`name.index`, `name.dict.dz`)."""
    index, data = folder / f"{name}.index", folder / f"{name}.dict.dz"
    try:
        text = gzip.decompress(data.read_bytes())  # dictzip is gzip with a seek table
        index_text = index.read_text(encoding="utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise DataError(
            f"{folder}/{name}.{{index,dict.dz}} is not a readable dictd database ({err})"
        ) from None
    return dictd_entries(index_text, text, str(index))


# SWORD's compressed modules: per testament, `<t>.<b>zs` holds a (offset, size, inflated size)
# triple of little-endian uint32 per block, `<t>.<b>zz` the deflated blocks (b: b book, c chapter, v
# verse blocks). A block holds its entries' OSIS text once, however many verses link to it.
_SWORD_BLOCK = struct.Struct("<III")


def sword_blocks(folder: Path) -> list[tuple[str, int, bytes]]:
    """(testament, block number, inflated text) of each non-empty block of a zCom/zText module."""
    blocks = []
    for testament in ("ot", "nt"):
        found = [
            folder / f"{testament}.{kind}zs" for kind in "bcv" if (folder / f"{testament}.{kind}zs").is_file()
        ]
        if not found:
            continue
        table, data = found[0].read_bytes(), found[0].with_suffix(found[0].suffix[:-1] + "z").read_bytes()
        if len(table) % _SWORD_BLOCK.size:
            raise DataError(f"{found[0]} is {len(table)} bytes; expected whole 12-byte block entries")
        for number, (offset, size, inflated) in enumerate(_SWORD_BLOCK.iter_unpack(table)):
            if size == 0:
                continue
            try:
                block = zlib.decompress(data[offset : offset + size])
            except zlib.error as err:
                raise DataError(f"{found[0]}: block {number} does not inflate ({err})") from None
            if len(block) != inflated:
                raise DataError(
                    f"{found[0]}: block {number} inflates to {len(block)} bytes; its entry says {inflated}"
                )
            blocks.append((testament, number, block))
    if not blocks:
        raise DataError(
            f"{folder} holds no compressed SWORD blocks (ot/nt .bzs/.czs/.vzs); expected a zCom module"
        )
    return blocks


# -- manual pages ---------------------------------------------------------------------------------
# The man macros that end a paragraph (their arguments, if any, are text: a heading, an item's tag)
_MAN_BREAK = frozenset("SH SS PP P LP TP TQ IP HP sp br RS RE in PD INDENT UNINDENT".split())
_MAN_FONT = frozenset("B I SM SB".split())  # one font for all arguments, joined by spaces
_MAN_ALTERNATE = frozenset("BR RB IR RI BI IB".split())  # alternating fonts: arguments joined without space
_MAN_NOFILL = {"nf": True, "EX": True, "fi": False, "EE": False}  # lines kept as typed (code, synopses)
_ROFF_CHARS = {
    "em": "\u2014",
    "en": "\u2013",
    "aq": "'",
    "dq": '"',
    "bu": "\u2022",
    "lq": "\u201c",
    "rq": "\u201d",
    "oq": "\u2018",
    "cq": "\u2019",
    "co": "\u00a9",
    "rg": "\u00ae",
    "mu": "\u00d7",
    "ti": "~",
    "ha": "^",
    "rs": "\\",
    "hy": "-",
    "mi": "-",
    "pl": "+",
    "eq": "=",
    "lt": "<",
    "gt": ">",
    "or": "|",
    "de": "\u00b0",
}
_ROFF_ESCAPE = re.compile(
    r"\\(?:f(?:\[[^\]]*\]|\(..|.)|s[-+]?\d+|\((..)|\[([^\]]*)\]|\*(?:\((..)|\[([^\]]*)\]|(.))|(.))"
)
_ROFF_SINGLE = {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "'": "'", "`": "`", ".": "."}
_MAN_ARGUMENT = re.compile(r'"((?:[^"]|"")*)"|(\S+)')


def _roff_escapes(text: str) -> str:
    """Text with roff's escapes resolved: fonts and sizes dropped, named characters drawn."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3) or match.group(4) or match.group(5)
        if name is not None:
            return _ROFF_CHARS.get(name, "")
        return _ROFF_SINGLE.get(match.group(6) or "", "")

    return _ROFF_ESCAPE.sub(one, text)


def _man_arguments(rest: str) -> list[str]:
    """A macro's arguments: words, or double-quoted strings (`""` inside one is a quote)."""
    return [
        m.group(1).replace('""', '"') if m.group(1) is not None else m.group(2)
        for m in _MAN_ARGUMENT.finditer(rest)
    ]


def man_sentences(source: str) -> list[str]:
    """The sentences of a manual page: filled text cut by `split_sentences`, each line of a no-fill
    block (`.nf`/`.EX`: code, synopses) and each table row (`.TS`) a sentence; comments, requests
    that only format (`.TH`, `.ad`, `.if`, ...) and the table's format lines are dropped."""
    sentences: list[str] = []
    prose: list[str] = []
    nofill = False
    table: str | None = None  # inside .TS: "format" until the format line ending in "." is passed

    def end_paragraph() -> None:
        sentences.extend(split_sentences("\n".join(prose)))
        prose.clear()

    def line_sentence(text: str) -> None:
        if text.strip():
            sentences.extend(split_sentences(text))

    for raw in source.splitlines():
        if raw.startswith(('.\\"', "'\\\"", '\\"')) or raw.strip() in (".", "'"):
            continue  # a comment or an empty request
        if table is not None:
            if raw.startswith(".TE"):
                table = None
            elif table == "format":
                table = "rows" if raw.rstrip().endswith(".") else "format"
            elif not raw.startswith("."):
                line_sentence(_roff_escapes(raw).replace("\t", " "))
            continue
        if raw.startswith((".", "'")):
            name, _, rest = raw[1:].strip().partition(" ")
            if name == "TS":
                end_paragraph()
                table = "format"
            elif name in _MAN_NOFILL:
                end_paragraph()
                nofill = _MAN_NOFILL[name]
            elif name in _MAN_BREAK:
                end_paragraph()
                if name in ("SH", "SS", "IP") and rest.strip():
                    args = _man_arguments(rest)
                    prose.append(_roff_escapes(" ".join(args[:1] if name == "IP" else args)))
                    end_paragraph()
            elif name in _MAN_FONT or name in _MAN_ALTERNATE:
                args = _man_arguments(rest)
                text = _roff_escapes((" " if name in _MAN_FONT else "").join(args))
                line_sentence(text) if nofill else prose.append(text)
            # any other request (.TH, .ad, .nh, .ft, .if, .UR, .so, ...) only formats: dropped
            continue
        text = _roff_escapes(raw)
        if nofill:
            line_sentence(text)
        else:
            prose.append(text)
    end_paragraph()
    return sentences
