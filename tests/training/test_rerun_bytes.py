"""A rerun that reproduces the science changes no byte its consumers read (docs/pipeline.md,
"Landing in steps"): the same pretraining run trained twice from scratch, and the same fine-tuning
row, leave byte-identical checkpoints, stamps, curves and metrics; only their timings files, which
no stage reads (`lmforge.timings`), hold a clock."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import SMOKE_DECODER, entry_stage, stage_config

RUN = [*SMOKE_DECODER, "trainer.max_steps=12", "trainer.val_check_interval=4", "train.checkpoint_every=3"]


def _bytes(*folders: str) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes() for folder in folders for p in sorted(Path(folder).rglob("*")) if p.is_file()
    }


def test_a_pretraining_run_trained_twice_leaves_the_same_bytes(in_workspace):
    folders = ("artifacts/pretrain/twice", "reports/pretrain/twice")
    entry_stage("pretrain")(stage_config(*RUN, "run_name=twice"))
    first = _bytes(*folders)
    clock = json.loads(Path("reports/timings/pretrain/twice.json").read_text())
    entry_stage("pretrain")(stage_config(*RUN, "run_name=twice", "train.resume=false"))  # from scratch again
    again = _bytes(*folders)
    assert {"artifacts/pretrain/twice/last.ckpt", "reports/pretrain/twice/metrics.json"} <= set(first)
    assert sorted(again) == sorted(first)
    assert [name for name in first if again[name] != first[name]] == []
    metrics = json.loads(first["reports/pretrain/twice/metrics.json"])
    assert not {"wall_seconds", "tokens_per_second"} & set(metrics)
    assert clock["tokens_seen"] == metrics["tokens_seen"] and clock["wall_seconds"] > 0 and clock["whole_run"]
