"""Split statistics and the data card (`reports/data_card.md`) that documents a prepared corpus.

A corpus whose documents come from several sources (`Document.source`, e.g. data=mix) also gets its
composition: documents per split, sentences, words, characters and share of words of each source.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from lmforge.data.documents import SPLITS, Document

SPLIT_STATS = ("documents", "sentences", "words", "bytes")  # per split, in reports/data.json


class Sizes(NamedTuple):
    sentences: int
    words: int  # whitespace-separated
    bytes: int  # UTF-8
    chars: int


def sizes(doc: Document) -> Sizes:
    text = "".join(doc.sentences)
    words = sum(len(sentence.split()) for sentence in doc.sentences)
    return Sizes(len(doc.sentences), words, len(text.encode("utf-8", "surrogatepass")), len(text))


class Tally:
    """Counts of the documents written to each split, kept as they stream past (memory: one entry per
    source, not per document): per source and split `SPLIT_STATS` plus characters (not bytes: they
    differ outside ASCII), and the genres when documents carry one."""

    def __init__(self) -> None:
        self._parts: dict[str, dict[str, Counter]] = {}
        self._first: dict[str, dict[str, None]] = {split: {} for split in SPLITS}  # sources, by split
        self.genres: Counter = Counter()

    def add(self, split: str, doc: Document, counted: Sizes | None = None) -> None:
        """Count `doc` into `split`; `counted` is `sizes(doc)` when it was measured elsewhere."""
        parts = self._parts.setdefault(doc.source, {name: Counter() for name in SPLITS})
        self._first[split].setdefault(doc.source)
        counts = parts[split]
        counts["documents"] += 1
        for key, value in zip(Sizes._fields, counted or sizes(doc)):
            counts[key] += value
        self.genres[doc.meta.get("genre")] += 1

    def sources(self) -> list[str]:
        """Sources in order of first appearance, train first."""
        return list(dict.fromkeys(source for split in SPLITS for source in self._first[split]))

    def composition(self) -> dict[str, dict[str, dict[str, int]]]:
        """{source: {split: counts}}, sources as `sources` orders them."""
        keys = (*SPLIT_STATS, "chars")
        return {
            source: {split: {key: self._parts[source][split][key] for key in keys} for split in SPLITS}
            for source in self.sources()
        }


def _metric_name(source: str) -> str:
    return re.sub(r"[^\w.-]", "_", source)  # MLflow metric names allow letters, digits, _ - . / and space


DROPPED_KINDS = ("bom", "control", "surrogate")  # see lmforge.data.text.invisible_kind
DROPPED_NAMES = {  # how the stage output and the data card name each kind
    "bom": "byte-order marks (U+FEFF)",
    "control": "control characters (NUL and other non-whitespace C0/C1)",
    "surrogate": "lone surrogates",
}


def metrics(tally: Tally, n_loaded: int, n_duplicates: int, dropped: Mapping[str, int]) -> dict[str, float]:
    """Flat numbers for reports/data.json, `dvc metrics show` and MLflow."""
    out: dict[str, float] = {"documents_loaded": n_loaded, "duplicates_dropped": n_duplicates}
    out.update({f"chars_dropped_{kind}": int(dropped.get(kind, 0)) for kind in DROPPED_KINDS})
    parts = tally.composition()
    for split in SPLITS:
        for key in SPLIT_STATS:
            out[f"{split}_{key}"] = sum(part[split][key] for part in parts.values())
    out["documents_total"] = sum(out[f"{split}_documents"] for split in SPLITS)
    if len(parts) > 1:
        total_words = sum(out[f"{split}_words"] for split in SPLITS)
        for source, part in parts.items():
            name = f"source_{_metric_name(source)}"
            for split in SPLITS:
                out[f"{name}_{split}_documents"] = part[split]["documents"]
            for key in ("sentences", "words", "chars"):
                out[f"{name}_{key}"] = sum(part[split][key] for split in SPLITS)
            out[f"{name}_word_share"] = round(out[f"{name}_words"] / max(total_words, 1), 6)
    return out


def render(
    name: str,
    provenance: Mapping[str, str],
    numbers: Mapping[str, float],
    tally: Tally,
    settings: Mapping[str, object],
    notes: Sequence[str] = (),
) -> str:
    """The data card as Markdown."""
    lines = [f"# Data card: {name}", "", "## Source", ""]
    lines += [f"- **{key}**: {value}" for key, value in provenance.items()]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    lines += ["", "## Preparation", ""]
    lines += [f"- **{key}**: {value}" for key, value in settings.items()]
    lines += [
        "- Unicode NFC, whitespace collapsed, empty sentences and documents dropped.",
        "- Invisible characters dropped: "
        + ", ".join(
            f"{int(numbers[f'chars_dropped_{kind}'])} {DROPPED_NAMES[kind]}" for kind in DROPPED_KINDS
        )
        + ".",
        f"- Exact duplicate documents dropped: {int(numbers['duplicates_dropped'])} "
        f"(of {int(numbers['documents_loaded'])} loaded).",
        "- Split by document: documents ranked by sha256(seed:id); first test, then val, rest train.",
        "",
        "## Splits",
        "",
        "| split | documents | sentences | words | bytes |",
        "|---|---:|---:|---:|---:|",
    ]
    for split in SPLITS:
        cells = [f"{int(numbers[f'{split}_{k}']):,}" for k in ("documents", "sentences", "words", "bytes")]
        lines.append(f"| {split} | " + " | ".join(cells) + " |")
    lines += _composition_table(tally.sources(), numbers)
    genres = tally.genres
    if genres and None not in genres:
        lines += ["", "## Genres (all splits)", "", "| genre | documents |", "|---|---:|"]
        lines += [f"| {genre} | {count} |" for genre, count in sorted(genres.items())]
    return "\n".join(lines) + "\n"


def _composition_table(sources: Sequence[str], numbers: Mapping[str, float]) -> list[str]:
    """Markdown lines of the per-source table (numbers from `metrics`); none for a single source."""
    if len(sources) < 2:
        return []
    lines = [
        "",
        "## Composition (by source, all splits)",
        "",
        "| source | train documents | val documents | test documents | sentences | words | characters "
        "| share of words |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for source in sources:
        name = f"source_{_metric_name(source)}"
        keys = [f"{name}_{split}_documents" for split in SPLITS] + [
            f"{name}_{k}" for k in ("sentences", "words", "chars")
        ]
        cells = [f"{int(numbers[key]):,}" for key in keys] + [f"{100 * numbers[f'{name}_word_share']:.1f}%"]
        lines.append(f"| {source} | " + " | ".join(cells) + " |")
    return lines
