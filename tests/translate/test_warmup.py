"""The warmup experiment's summary: arms from run names, means over seeds, one plot, refusals."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage
from lmforge.errors import DataError
from lmforge.translate.warmup import arm_of

ARMS = ("post-noam", "post-constant", "pre-noam", "pre-constant")


def _fake_run(folder, loss: float, bleu: float) -> None:
    folder.mkdir(parents=True)
    (folder / "val_loss.csv").write_text(f"step,val_loss\n50,{loss + 1}\n100,{loss}\n")
    (folder / "metrics.json").write_text(json.dumps({"final_val_loss": loss}))
    (folder / "eval.json").write_text(json.dumps({"bleu": bleu}))


def test_the_summary_averages_each_arm_over_its_seeds(tmp_path):
    runs = []
    for k, arm in enumerate(ARMS):
        for seed in (1, 2):
            name = f"warmup-{arm}-s{seed}"
            _fake_run(tmp_path / "runs" / name, loss=3.0 + k + seed / 10, bleu=10.0 - k + seed)
            runs.append(name)
    cfg = OmegaConf.create(
        {
            "warmup_summary": {
                "runs": runs,
                "runs_dir": str(tmp_path / "runs"),
                "reports_dir": str(tmp_path / "out"),
            }
        }
    )
    result = entry_stage("translate_warmup")(cfg)
    assert result.metrics["post-noam_final_val_loss"] == pytest.approx(3.15)
    assert result.metrics["pre-constant_bleu"] == pytest.approx(7.0 + 1.5)
    table = (tmp_path / "out" / "summary.md").read_text().splitlines()
    assert [line.split(" | ")[0] for line in table[4:]] == [
        "| Post-LN, Noam warmup",
        "| Post-LN, no warmup",
        "| Pre-LN, Noam warmup",
        "| Pre-LN, no warmup",
    ]
    assert "3.100 / 11.00, 3.200 / 12.00" in table[4]
    assert (tmp_path / "out" / "val_loss.png").stat().st_size > 1000


def test_run_names_and_missing_runs_are_refused(tmp_path):
    assert arm_of("warmup-pre-constant-s2") == "pre-constant"
    with pytest.raises(DataError, match="expected warmup-<post|pre>"):
        arm_of("post-noam")
    cfg = OmegaConf.create(
        {
            "warmup_summary": {
                "runs": ["warmup-post-noam-s1"],
                "runs_dir": str(tmp_path),
                "reports_dir": str(tmp_path),
            }
        }
    )
    with pytest.raises(DataError, match="expected a finished translate_train and translate_eval run"):
        entry_stage("translate_warmup")(cfg)
