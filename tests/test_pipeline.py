"""End to end: the DVC pipeline on the smoke experiment, in a copy of the repository.

One run checks that `dvc exp run -S experiment=smoke` builds every stage, that a second `dvc repro` runs nothing, that
editing one config value reruns exactly the stages downstream of it, that `dvc metrics show`
reads every stage's numbers, that MLflow recorded one run per stage with its config and tags, and
that the stages where tracking runs inside the work write the same outputs with tracking off.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from repo_copy import copy_repository

from helpers import sweep_jobs
from lmforge.export.card import card_facts

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


INTERPRETED = list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["interpret"]["foreach"])
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
    *(f"pretrain_probe@{p}" for p in VARS["probes"]),
    *(f"interpret@{name}" for name in INTERPRETED),
    "findings",
}
MULTIRUNS = {
    "finetune": ROWS,
    "distill": DISTILL_RUNS,
    "distill_finetune": DISTILL_ROWS,
}  # one MLflow run each


def row_task(row: str) -> str:
    return next(d["override /task"] for d in ROWS[row]["defaults"] if "override /task" in d)


# A guard against a hung DVC call, not a speed target. The first `dvc exp run` (about 50 stages) took
# 878 s on the 2-core host of 2026-11-27 (1,150 s before ruamel.yaml.clib: docs/pipeline.md), and hosts
# differ by more than 2x (a clean clone's encoder pretraining: 238 s on one, 512 s on another).
HANG_SECONDS = 3600


def _dvc(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    dvc = [sys.executable, "-m", "dvc"]
    result = subprocess.run(
        dvc + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=HANG_SECONDS
    )
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
    assert stored_bytes(repo) <= 50e6  # issue 27: the smoke repro's artifacts, every logged model included
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
    # 30 steps teach the smoke model little (it may still end every sentence at once): the decode ran
    assert (
        translated["test_sentences"] > 0 and 0 <= translated["bleu"] <= 100 and 0 <= translated["chrf"] <= 100
    )
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
    for name in INTERPRETED:  # the smoke models' kept checkpoints
        interpreted = json.loads((repo / "reports" / "interpret" / name / "interpret.json").read_text())
        assert [t["step"] for t in interpreted["trajectory"]] == [3, 9, 30], name
    findings = json.loads((repo / "reports" / "findings.json").read_text())
    assert sum(findings["counts"].values()) == len(findings["claims"]) >= 11
    assert findings["claims"]["induction"]["verdict"] != "not tested"  # read from this run's interpret
    for family in FAMILIES:  # each pretrained model as a Hugging Face folder that transformers reproduces
        exported = json.loads((repo / "reports" / "export" / f"{family}.json").read_text())
        assert exported["max_abs_logit_diff"] <= 1e-4 and exported["tokenizer_ids_identical"], family
        assert family == "encoder" or exported["greedy_prompts"] > 0  # near-ties of a smoke model may differ
        assert (repo / "artifacts" / "hf" / family / "model.safetensors").is_file()
        card = card_facts((repo / "artifacts" / "hf" / family / "README.md").read_text(encoding="utf-8"))
        scores = json.loads((repo / "reports" / "eval" / f"{family}.json").read_text())
        [result] = card["model-index"][0]["results"]  # the model card carries this run's evaluate scores
        assert result["metrics"][0]["value"] == round(scores["test_perplexity"], 4), family

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
    downstream = {
        "tokenizer@wordpiece",
        "encode@wordpiece",
        "pretrain@encoder",
        "evaluate@encoder",
        "interpret@encoder",
    }
    distill = {"distill", "distill_finetune", "distill_summary"}
    assert rerun == downstream | {"export@encoder", "finetune", "finetune_summary"} | distill | {"findings"}

    check_mlflow_store(repo, env, cells, stages=ALL_STAGES | rerun)
    check_killed_repro_leaves_no_running_run(repo, env)
    check_tracking_changes_no_output(repo, env)


def check_killed_repro_leaves_no_running_run(repo: Path, env: dict[str, str]) -> None:
    """Issue 53 (c): `kill -9` of `dvc repro` in the middle of a stage, then `dvc repro`: the stage
    reruns whole, no MLflow run is left RUNNING, and the killed invocation's stage and pipeline runs
    read KILLED."""
    import signal
    import time

    import mlflow

    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    stage = "finetune"  # minutes of rows, and its outputs are not persisted: the rerun starts it afresh
    started = time.time() * 1000
    command = [sys.executable, "-m", "dvc", "repro", "--force", "--single-item", stage]
    killed = subprocess.Popen(command, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + HANG_SECONDS
    # Killed as soon as the first row's own run (`finetune@<row>`) has ended: between two rows, where
    # the stage's and the pipeline's runs must still be RUNNING (a multirun's rows leave them open
    # until their process exits), so that the next invocation marks them KILLED, not FINISHED.
    query = (
        f"tags.dvc_stage = '{stage}' and attributes.status = 'FINISHED' and attributes.start_time > {started:.0f}"
        f" and tags.mlflow.runName LIKE '{stage}@%'"
    )
    while not len(mlflow.search_runs(experiment_names=["lmforge"], filter_string=query)):
        assert killed.poll() is None and time.monotonic() < deadline, "the stage never finished a row's run"
        time.sleep(0.1)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(timeout=60)
    assert stage in _ran(
        _dvc(["repro", "--single-item", stage, "finetune_summary"], repo, env)
    )  # again, whole
    assert set(json.loads((repo / "reports" / "finetune" / "summary.json").read_text())["rows"]) == set(ROWS)
    running = mlflow.search_runs(experiment_names=["lmforge"], filter_string="attributes.status = 'RUNNING'")
    assert running.empty, running[["tags.mlflow.runName", "tags.lmforge_level"]].to_string()
    left = mlflow.search_runs(
        experiment_names=["lmforge"], filter_string=f"attributes.start_time > {started:.0f}"
    )
    assert {"KILLED", "FINISHED"} <= set(left["status"])  # the killed runs are marked, the rerun ended
    # the killed invocation's own stage and pipeline runs (the first of each level since the start)
    first = left.sort_values("start_time").drop_duplicates("tags.lmforge_level")
    status = dict(zip(first["tags.lmforge_level"], first["status"]))
    assert status["stage"] == status["pipeline"] == "KILLED", status


def stored_files(repo: Path) -> list[Path]:
    """The MLflow artifact files under `repo` (the sqlite store's artifact folders)."""
    return [p for folder in ("mlruns", "mlartifacts") for p in (repo / folder).rglob("*") if p.is_file()]


def stored_bytes(repo: Path) -> int:
    return sum(p.stat().st_size for p in stored_files(repo))


def check_mlflow_store(repo: Path, env: dict[str, str], cells: list, stages: set[str]) -> None:
    """What issue 27 asks of the store of a smoke `dvc repro` (plus the rerun after the WordPiece edit)."""
    import mlflow
    import pandas as pd
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    client = MlflowClient()
    runs = mlflow.search_runs(experiment_names=["lmforge"])
    by_id = runs.set_index("run_id")
    pipelines = runs[runs["tags.lmforge_level"] == "pipeline"]
    assert len(pipelines) == 2  # one per `dvc repro` that ran stages (the no-op one opened none)
    assert all(
        name.startswith("dvc ") for name in pipelines["tags.mlflow.runName"]
    )  # `dvc exp run`, `dvc repro`

    def root(run_id: str) -> str:
        while isinstance(parent := by_id.loc[run_id].get("tags.mlflow.parentRunId"), str):
            run_id = parent
        return run_id

    assert {root(r) for r in runs["run_id"]} == set(pipelines["run_id"])  # every run descends from one
    staged = runs[runs["tags.lmforge_level"] != "pipeline"]
    assert set(staged["tags.dvc_stage"]) == stages  # DVC's own stage names, on every run below them
    assert runs["tags.mlflow.runName"].is_unique
    for tag in ("git_commit", "git_dirty", "experiment", "data_hash"):
        assert staged[f"tags.{tag}"].notna().all(), tag
    assert set(staged["tags.experiment"]) == {"smoke"}

    children = runs[runs["tags.lmforge_cell"].notna()]  # one child run per scaling cell, none twice
    assert len(children) == len(cells) == children["tags.lmforge_cell"].nunique()
    sweep = runs[(runs["tags.dvc_stage"] == "scaling_sweep") & runs["tags.lmforge_cell"].isna()]
    assert set(children["tags.mlflow.parentRunId"]) == set(sweep["run_id"]) and len(sweep) == 1
    jobs = runs[runs["tags.lmforge_job"].str.fullmatch(r"finetune@[^/]+", na=False)]  # a row, not its seeds
    assert set(jobs["tags.lmforge_job"]) >= {f"finetune@{row}" for row in {*ROWS, *DISTILL_ROWS}}
    seeds = runs[runs["tags.mlflow.parentRunId"].isin(jobs["run_id"])]
    assert len(seeds) >= len(jobs) and (seeds["metrics.test/score"] >= 0).all()  # each seed its own run
    assert jobs["metrics.test/score"].notna().all()  # one key for every task's headline metric

    # params: one spelling, and what the built model is
    params = [c.removeprefix("params.") for c in runs.columns if c.startswith("params.")]
    assert not [p for p in params if "/" in p]  # Lightning's duplicate `model/vocab_size` spelling is gone
    pretrain = runs[(runs["tags.lmforge_job"] == "pretrain@decoder")].iloc[0]
    built = torch.load(repo / "artifacts/pretrain/decoder/best.ckpt", weights_only=True)["hyper_parameters"]
    for key, value in built["model"].items():
        assert pretrain[f"params.model.{key}"] == str(value), key
    assert pretrain["metrics.val/clm_loss"] > 0 and pretrain["metrics.train/clm_loss"] > 0
    curve = client.get_metric_history(pretrain["run_id"], "val/clm_loss")
    logged = {m.step for m in curve}
    csv_steps = {int(r["step"]) for r in csv.DictReader(open(repo / "reports/pretrain/decoder/val_loss.csv"))}
    assert logged == csv_steps  # MLflow's steps are the CSV's: optimizer steps

    # params, datasets and system metrics on every training run (issue 53: seeds and cells included)
    curves = [c for c in runs.columns if c.startswith("metrics.train/")]
    training = runs[
        runs["tags.lmforge_job"].isin(["pretrain@decoder", "translate_train"])
        | runs["run_id"].isin(jobs["run_id"])
        | runs[curves].notna().any(axis=1)
    ]
    assert len(training) > len(jobs) + len(children)  # the seeds' and the cells' runs among them
    for run_id in training["run_id"]:
        run = client.get_run(run_id)
        assert run.data.params, run.info.run_name
        assert {d.dataset.digest for d in run.inputs.dataset_inputs}, run.info.run_name
        assert any(k.startswith("system/") for k in run.data.metrics), run.info.run_name

    # a registered model with aliases, loadable by name@alias, predicting on raw text
    model = mlflow.pyfunc.load_model("models:/lmforge-smoke-pretrain-decoder@champion")
    predicted = model.predict(pd.DataFrame({"text": ["The jury said that the city"]}))
    assert len(predicted) == 1 and isinstance(predicted[0], str)
    evaluate = runs[runs["tags.lmforge_job"] == "evaluate@decoder"].iloc[0]
    assert evaluate["tags.evaluates_run_id"] in set(
        runs[runs["tags.lmforge_job"] == "pretrain@decoder"]["run_id"]
    )
    assert client.get_model_version_by_alias("lmforge-smoke-pretrain-decoder", "candidate")
    translation = client.get_model_version_by_alias("lmforge-smoke-translate_train-main", "champion")
    assert float(translation.tags["bleu"]) >= 0  # translate_eval registered the model translate_train logged

    # fine-tuning: every row logs its model and names the run it starts from; the best row of each
    # task is the champion of lmforge-<overlay>-finetune-<task>, and answers a raw row
    assert jobs["tags.lmforge_model_uri"].notna().all()
    row = jobs[jobs["tags.lmforge_job"] == "finetune@encoder-sentiment"].iloc[0]
    encoder = runs[runs["tags.lmforge_job"] == "pretrain@encoder"]
    assert row["tags.starts_from"] == "artifacts/pretrain/encoder"
    assert row["tags.starts_from_run_id"] in set(encoder["run_id"])
    sentiment = jobs[jobs["tags.lmforge_job"].str.endswith("-sentiment")]
    champion = client.get_model_version_by_alias("lmforge-smoke-finetune-sentiment", "champion")
    assert float(champion.tags["test/score"]) == sentiment["metrics.test/score"].max()
    label = mlflow.pyfunc.load_model("models:/lmforge-smoke-finetune-sentiment@champion").predict(
        pd.DataFrame({"text": ["A moving, funny film."]})
    )
    assert len(label) == 1 and label[0] in {"negative", "positive"}

    # lean artifacts: no checkpoint or data uploaded (the size of the first repro's is checked above)
    stored = stored_files(repo)
    uploaded = [p for p in stored if "models" not in p.parts]  # the logged models hold their one checkpoint
    assert not [p for p in uploaded if p.suffix in (".jsonl", ".npy", ".ckpt")]


# The stages whose work runs with MLflow tracking inside it (runs opened around training, per-seed
# child runs, logged and registered models, scaling cells' child runs); every other stage tracks
# around a finished computation.
TRACKED_WORK = [
    "pretrain@decoder",
    "evaluate@decoder",
    "finetune",
    "distill",
    "translate_train",
    "scaling_sweep",
]
# What measures wall-clock time: two runs of one config differ there with or without tracking.
TIMED = re.compile(r"seconds|latency|per_second|wall|_ms(_|$)|(^| )(s|ms)$")


def check_tracking_changes_no_output(repo: Path, env: dict[str, str]) -> None:
    """Issue 51: tracking is observability, so it is left out of every stage's deps. The proof: the
    stages rerun with the logger off write every output as they did with it on, byte for byte once
    wall-clock fields are masked (checkpoints compared by their loaded values, as their zip records
    name a temporary file)."""
    import mlflow

    tracked = {path: comparable(path) for path in outputs_of(repo, TRACKED_WORK)}
    runs_before = len(mlflow.search_runs(experiment_names=["lmforge"]))
    logger = repo / "conf" / "logger" / "mlflow.yaml"
    logger.write_text(logger.read_text().replace("enabled: true", "enabled: false"))
    shutil.rmtree(repo / ".lmforge" / "scaling")  # the cells train again instead of coming from the store
    _dvc(["repro", "--force", "--single-item", *TRACKED_WORK], repo, env)
    assert len(mlflow.search_runs(experiment_names=["lmforge"])) == runs_before  # tracking was off
    untracked = {path: comparable(path) for path in outputs_of(repo, TRACKED_WORK)}
    assert set(untracked) == set(tracked)
    differ = sorted(str(p.relative_to(repo)) for p in tracked if tracked[p] != untracked[p])
    assert not differ, f"outputs differ with tracking off: {differ}"


def outputs_of(repo: Path, stages: list[str]) -> list[Path]:
    """Every file under the outs of `stages` in `repo`'s dvc.yaml."""
    from dvc.repo import Repo

    dvc = Repo(str(repo))
    try:
        outs = {  # by name: `addressing` is relative to the working directory, not to `repo`
            s.name: [Path(o.fs_path) for o in s.outs]
            for s in dvc.index.stages
            if Path(s.path).resolve() == (repo / "dvc.yaml").resolve() and s.name in stages
        }
    finally:
        dvc.close()
    assert set(outs) == set(stages), f"no such stages: {sorted(set(stages) - set(outs))}"
    files = {
        s: [f for o in paths for f in ([o] if o.is_file() else o.rglob("*")) if f.is_file()]
        for s, paths in outs.items()
    }
    assert all(files.values()), f"stages without output files: {[s for s, f in files.items() if not f]}"
    return sorted(f for paths in files.values() for f in paths)


def comparable(path: Path) -> Any:
    """A file's content with wall-clock measurements masked."""
    if path.suffix == ".json":
        return _untimed(json.loads(path.read_text()))
    if path.suffix == ".ckpt":
        return _untimed(torch.load(path, weights_only=True, map_location="cpu"))
    if path.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(path.read_text())))
        kept = [i for i, name in enumerate(rows[0] if rows else []) if not TIMED.search(name)]
        return [[row[i] for i in kept] for row in rows]
    if path.suffix == ".md":
        return _untimed_markdown(path.read_text())
    return path.read_bytes()


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not (isinstance(k, str) and TIMED.search(k))}
    if isinstance(value, (list, tuple)):
        return [_untimed(v) for v in value]
    if isinstance(value, torch.Tensor):
        return (value.dtype, tuple(value.shape), value.flatten().tolist())
    return value


def _untimed_markdown(text: str) -> list[str]:
    """A markdown file's lines with the cells of timed columns blanked (a table's header sets them)."""
    lines, header = [], []
    for line in text.splitlines():
        cells = line.strip("|").split("|") if line.startswith("|") else None
        if cells is None or not header:
            header = [c.strip() for c in cells] if cells else []
            lines.append(line)
            continue
        lines.append(
            "|".join("" if i < len(header) and TIMED.search(header[i]) else c for i, c in enumerate(cells))
        )
    return lines
