"""Split statistics and the data card (`reports/data_card.md`) that documents a prepared corpus."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from lmforge.data.documents import SPLITS, Document


def split_stats(documents: Sequence[Document]) -> dict[str, int]:
    """Counts of one split: documents, sentences, whitespace words and UTF-8 bytes of text."""
    sentences = [s for doc in documents for s in doc.sentences]
    return {
        "documents": len(documents),
        "sentences": len(sentences),
        "words": sum(len(s.split()) for s in sentences),
        "bytes": sum(len(s.encode("utf-8", "surrogatepass")) for s in sentences),
    }


DROPPED_KINDS = ("bom", "control", "surrogate")  # see lmforge.data.text.invisible_kind


def metrics(
    splits: Mapping[str, Sequence[Document]], n_loaded: int, n_duplicates: int, dropped: Mapping[str, int]
) -> dict[str, float]:
    """Flat numbers for reports/data.json, `dvc metrics show` and MLflow."""
    out: dict[str, float] = {"documents_loaded": n_loaded, "duplicates_dropped": n_duplicates}
    out.update({f"chars_dropped_{kind}": int(dropped.get(kind, 0)) for kind in DROPPED_KINDS})
    for split in SPLITS:
        for key, value in split_stats(splits[split]).items():
            out[f"{split}_{key}"] = value
    out["documents_total"] = sum(out[f"{split}_documents"] for split in SPLITS)
    return out


def render(
    name: str,
    provenance: Mapping[str, str],
    numbers: Mapping[str, float],
    splits: Mapping[str, Sequence[Document]],
    settings: Mapping[str, object],
) -> str:
    """The data card as Markdown."""
    lines = [f"# Data card: {name}", "", "## Source", ""]
    lines += [f"- **{key}**: {value}" for key, value in provenance.items()]
    lines += ["", "## Preparation", ""]
    lines += [f"- **{key}**: {value}" for key, value in settings.items()]
    lines += [
        "- Unicode NFC, whitespace collapsed, empty sentences and documents dropped.",
        "- Invisible characters dropped: "
        f"{int(numbers['chars_dropped_bom'])} byte-order marks (U+FEFF), "
        f"{int(numbers['chars_dropped_control'])} control characters (NUL and other non-whitespace C0/C1), "
        f"{int(numbers['chars_dropped_surrogate'])} lone surrogates.",
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
    genres = Counter(doc.meta.get("genre") for docs in splits.values() for doc in docs)
    if genres and None not in genres:
        lines += ["", "## Genres (all splits)", "", "| genre | documents |", "|---|---:|"]
        lines += [f"| {genre} | {count} |" for genre, count in sorted(genres.items())]
    return "\n".join(lines) + "\n"
