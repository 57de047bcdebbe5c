"""End to end: the DVC pipeline on the smoke experiment, in a copy of the repository.

One run checks that `dvc exp run -S experiment=smoke` builds every stage, that a second `dvc repro` runs nothing, that
editing one config value reruns exactly the stages downstream of it, that `dvc metrics show`
reads every stage's numbers and that MLflow recorded one run per stage with its config and tags.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from repo_copy import copy_repository

from helpers import sweep_jobs

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["encoder", "decoder", "encoder_decoder"]
VARS = {
    k: v
    for entry in yaml.safe_load((ROOT / "dvc.yaml").read_text())["vars"]
    for k, v in (entry if isinstance(entry, dict) else yaml.safe_load((ROOT / entry).read_text())).items()
}


def stage_options(stage: str, group: str) -> list[str]:
    """The options of `group` that the `--multirun` sweep of a stage's command runs (`glob(*,exclude=...)`)."""
    words = shlex.split(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage]["cmd"])
    sweep = next(w for w in words if w.startswith(f"{group}="))
    return [option.split("=", 1)[1] for [option] in sweep_jobs(["--multirun", sweep])]


ROWS = {
    row: yaml.safe_load((ROOT / "conf" / "row" / f"{row}.yaml").read_text())
    for row in stage_options("finetune", "row")
}
DISTILL_RUNS = set(stage_options("distill", "distill_run"))
DISTILL_ROWS = set(stage_options("distill_finetune", "distill_row"))
ALL_STAGES = {
    "prepare",
    "tokenizer@wordpiece",
    "tokenizer@bpe",
    "encode@wordpiece",
    "encode@bpe",
    *(f"pretrain@{f}" for f in FAMILIES),
    *(f"evaluate@{f}" for f in FAMILIES),
    *(f"export@{f}" for f in FAMILIES),
    *(f"task@{t}" for t in VARS["tasks"]),
    "finetune",
    "finetune_summary",
    "distill",
    "distill_finetune",
    "distill_summary",
    "translate_data",
    "translate_tokenizer",
    "translate_train",
    "translate_eval",
    "scaling_prepare",
    "scaling_tokenizer",
    "scaling_encode",
    "scaling_sweep",
    "scaling_fit",
    "scaling_plots",
    "interpret",
    "findings",
}
MULTIRUNS = {
    "finetune": ROWS,
    "distill": DISTILL_RUNS,
    "distill_finetune": DISTILL_ROWS,
}  # one MLflow run each


def row_task(row: str) -> str:
    return next(d["override /task"] for d in ROWS[row]["defaults"] if "override /task" in d)


def _dvc(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    dvc = [sys.executable, "-m", "dvc"]
    result = subprocess.run(dvc + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def _ran(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


@pytest.mark.slow
def test_smoke_pipeline_under_dvc(tmp_path):
    repo = tmp_path / "repo"
    copy_repository(repo)
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{repo}/mlruns.db",
        "TOKENIZERS_PARALLELISM": "false",
    }

    first = _dvc(["exp", "run", "-S", "experiment=smoke"], repo, env)  # an experiment on the smoke overlay
    assert _ran(first) == ALL_STAGES
    for family in FAMILIES:
        report = json.loads((repo / "reports" / "eval" / f"{family}.json").read_text())
        assert report["test_n_tokens"] > 0 and report["unigram_loss"] > 0
        assert (repo / "artifacts" / "pretrain" / family / "best.ckpt").is_file()
    assert (repo / "reports" / "eval" / "decoder" / "samples.json").is_file()
    summary = json.loads((repo / "reports" / "finetune" / "summary.json").read_text())
    assert set(summary["rows"]) == set(ROWS)  # every row the stage sweeps, each with its own curve
    assert {p.stem for p in (repo / "reports" / "finetune" / "curves").glob("*.csv")} == set(ROWS)
    for row, metrics in summary["rows"].items():
        first = yaml.safe_load((repo / "conf" / "task" / f"{row_task(row)}.yaml").read_text())["metrics"][0]
        assert 0.0 <= metrics[f"test_{first}"] <= 1.0 and metrics["params_trainable"] > 0, row
    claims = yaml.safe_load((repo / "conf" / "summary" / "finetune.yaml").read_text())["comparisons"]
    assert set(summary["comparisons"]) == {f"{c['a']}-vs-{c['b']}" for c in claims}
    assert all(c["seeds"] == 1 for c in summary["comparisons"].values())  # smoke runs one seed
    rows_table, _, claims_table = (repo / "reports" / "finetune" / "summary.md").read_text().split("\n\n")
    assert rows_table.count("\n") == 1 + len(ROWS) and claims_table.count("\n") == 2 + len(claims)
    distilled = json.loads((repo / "reports" / "distill" / "summary.json").read_text())
    assert set(distilled) == {"encoder"}  # the decoder's is an experiment (distill_decoder)
    for family, entry in distilled.items():
        assert entry["student"]["layers"] == entry["teacher"]["layers"] // 2, family
        assert entry["student"]["params"] == entry["control"]["params"] < entry["teacher"]["params"]
        assert entry["student"]["retention"]["mean"] > 0 and entry["control"]["test_loss"] > 0
    families, _, pairs = (repo / "reports" / "distill" / "summary.md").read_text().split("\n\n")
    assert families.count("\n") == 1 + 3 * len(distilled)  # teacher, student, control per family
    assert pairs.count("\n") == 2 + sum(len(entry["tasks"]) for entry in distilled.values())
    translated = json.loads((repo / "reports" / "translate" / "main" / "eval.json").read_text())
    assert translated["test_sentences"] > 0 and 0 <= translated["bleu"] <= 100 and translated["chrf"] > 0
    assert translated["baseline_dictionary_bleu"] > translated["baseline_copy_bleu"]
    assert "tok:13a" in (repo / "reports" / "translate" / "main" / "bleu.md").read_text()
    assert (repo / "reports" / "translate" / "main" / "samples.md").read_text().count("- hypothesis:") >= 1
    scaling = repo / "reports" / "scaling" / "default"
    cells = json.loads((scaling / "cells.json").read_text())["cells"]
    fit = json.loads((scaling / "fit.json").read_text())
    plateau = set(fit["plateau"]["cells"])  # cells that never left the unigram plateau: not fitted
    assert fit["n_rows"] == len(cells) and fit["n_cells"] == len({c["name"] for c in cells} - plateau)
    assert fit["summary"] in (scaling / "law.md").read_text()
    # the smoke cells (16-206 steps) stay on the plateau, so no law is fitted; a grid that learns gets one
    assert (fit["law"] is None) == (fit["n_cells"] < 7) and (fit["law"] is None or fit["law"]["alpha"] >= 0)
    assert ("| alpha |" in (scaling / "law.md").read_text()) == (fit["law"] is not None)
    assert len(list((scaling / "figures").glob("*.png"))) == 4
    interpreted = json.loads((repo / "reports" / "interpret" / "decoder" / "interpret.json").read_text())
    assert [t["step"] for t in interpreted["trajectory"]] == [3, 9, 30]  # the smoke decoder's kept checkpoints
    findings = json.loads((repo / "reports" / "findings.json").read_text())
    assert sum(findings["counts"].values()) == len(findings["claims"]) >= 11
    assert findings["claims"]["induction"]["verdict"] != "not tested"  # read from this run's interpret
    for family in FAMILIES:  # each pretrained model as a Hugging Face folder that transformers reproduces
        exported = json.loads((repo / "reports" / "export" / f"{family}.json").read_text())
        assert exported["max_abs_logit_diff"] <= 1e-4 and exported["tokenizer_ids_identical"], family
        assert family == "encoder" or exported["greedy_prompts"] > 0  # near-ties of a smoke model may differ
        assert (repo / "artifacts" / "hf" / family / "model.safetensors").is_file()

    assert _ran(_dvc(["repro"], repo, env)) == set()  # nothing changed, nothing runs

    shown = _dvc(["metrics", "show"], repo, env)
    for name in (
        "reports/data.json",
        "reports/tokenizer/bpe.json",
        "reports/eval/decoder.json",
        "reports/finetune/summary.json",
        "reports/distill/summary.json",
        "reports/translate/main/eval.json",
    ):
        assert name in shown

    config = repo / "conf" / "tokenizer" / "wordpiece.yaml"
    config.write_text(config.read_text() + "lowercase: false\n")  # the preset now changes a default
    rerun = _ran(_dvc(["repro"], repo, env))
    downstream = {"tokenizer@wordpiece", "encode@wordpiece", "pretrain@encoder", "evaluate@encoder"}
    distill = {"distill", "distill_finetune", "distill_summary"}
    assert rerun == downstream | {"export@encoder", "finetune", "finetune_summary"} | distill | {"findings"}

    import mlflow

    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(experiment_names=["lmforge"])
    children = runs[runs["tags.lmforge_cell"].notna()]  # one child run per scaling cell, none twice
    assert len(children) == len(cells) == children["tags.lmforge_cell"].nunique()
    runs = runs[runs["tags.lmforge_cell"].isna()]
    extra = sum(len(jobs) - 1 for jobs in MULTIRUNS.values())  # one MLflow run per job, not per stage
    assert len(runs) == len(ALL_STAGES) + len(rerun) + 2 * extra
    per_stage = runs["tags.dvc_stage"].value_counts()
    assert all(per_stage[f"distill@{run}"] == 2 for run in DISTILL_RUNS)  # the WordPiece edit reruns each
    assert set(runs["tags.dvc_stage"]) >= {f"finetune@{row}" for row in {*ROWS, *DISTILL_ROWS}}
    assert set(runs["tags.dvc_stage"]) >= {f"distill@{run}" for run in DISTILL_RUNS}
    pretrain = runs[runs["tags.dvc_stage"] == "pretrain@decoder"].iloc[0]
    assert pretrain["params.model.family"] == "decoder"
    assert pretrain["tags.git_commit"] and pretrain["tags.data_hash"] != "none"
    assert pretrain["metrics.val/loss"] > 0
