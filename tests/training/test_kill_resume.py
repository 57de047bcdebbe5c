"""End to end through the entry point: `kill -9` at several moments, then the same command again,
ends with the curves and metrics of an uninterrupted run and one finished MLflow run; two runs of
the same stage at once are refused; DDP over two processes matches one process at the same
global batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import SMOKE_DECODER

ROOT = Path(__file__).resolve().parents[2]
BASE = [
    *SMOKE_DECODER,
    "model.dropout=0.1",
    "trainer.max_steps=40",
    "trainer.val_check_interval=10",
    "train.checkpoint_every=4",
]


def _start(workspace: Path, *args: str, uri: str) -> subprocess.Popen:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "MLFLOW_TRACKING_URI": uri}
    command = [sys.executable, str(ROOT / "pipelines" / "pretrain.py"), *BASE, *args]
    return subprocess.Popen(
        command, cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _record(workspace: Path, name: str) -> tuple[dict, dict]:
    reports = workspace / "reports/pretrain" / name
    metrics = json.loads((reports / "metrics.json").read_text())
    return metrics, {f: (reports / f).read_text() for f in ("train_loss.csv", "val_loss.csv")}


@pytest.mark.slow
def test_kill_nine_and_rerun_matches_an_uninterrupted_run(workspace):
    uri = f"sqlite:///{workspace}/kill.db"
    whole = _start(workspace, "run_name=whole", uri=uri)
    assert whole.wait(timeout=600) == 0, whole.stderr.read()[-3000:]

    last = workspace / "artifacts/pretrain/killed/last.ckpt"
    kills = 0
    for delay in (0.0, 1.5, 0.7):  # right after a checkpoint appears, and between checkpoints
        run = _start(workspace, "run_name=killed", uri=uri)
        seen = last.stat().st_mtime if last.exists() else 0.0
        deadline = time.time() + 300
        while run.poll() is None and time.time() < deadline:
            if last.exists() and last.stat().st_mtime != seen:
                time.sleep(delay)
                run.send_signal(signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.05)
        run.wait(timeout=60)
    assert kills >= 2
    final = _start(workspace, "run_name=killed", uri=uri)  # the same command, as `dvc repro` reruns it
    assert final.wait(timeout=600) == 0, final.stderr.read()[-3000:]

    (m_whole, curves_whole), (m_killed, curves_killed) = (
        _record(workspace, "whole"),
        _record(workspace, "killed"),
    )
    assert curves_killed == curves_whole
    for key in ("best_val_loss", "best_val_step", "steps", "tokens_seen"):
        assert m_killed[key] == pytest.approx(m_whole[key], rel=1e-6), key

    import mlflow

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(
        experiment_names=["lmforge"], filter_string="tags.dvc_stage = 'pretrain@killed'"
    )
    assert sorted(runs["status"]) == ["FINISHED"]  # one run, continued across the kills


@pytest.mark.slow
def test_extending_a_finished_run_under_mlflow_keeps_both_runs_finished(workspace):
    """The README's recipe for more steps: a new run_name with train.extend_from, default MLflow logger."""
    uri = f"sqlite:///{workspace}/extend.db"
    short = ["trainer.max_steps=8", "trainer.val_check_interval=4", "optim.warmup_steps=2"]
    first = _start(workspace, *short, "run_name=base", uri=uri)
    assert first.wait(timeout=600) == 0, first.stderr.read()[-3000:]
    # More steps in the same folder are refused in one line, before any MLflow run is opened or changed.
    refused = _start(workspace, *short, "run_name=base", "trainer.max_steps=12", "train.resume=true", uri=uri)
    assert refused.wait(timeout=600) == 2
    err = refused.stderr.read().strip()
    assert err.startswith("error: train.resume=true") and "trainer.max_steps" in err and "\n" not in err, err
    longer = [*short, "trainer.max_steps=12", "run_name=base-12", "train.extend_from=artifacts/pretrain/base"]
    extend = _start(workspace, *longer, uri=uri)
    assert extend.wait(timeout=600) == 0, extend.stderr.read()[-3000:]
    again = _start(workspace, *short, "run_name=base", uri=uri)  # what `dvc repro` runs for the base stage
    assert again.wait(timeout=600) == 0, again.stderr.read()[-3000:]

    assert _record(workspace, "base")[0]["steps"] == 8
    assert _record(workspace, "base-12")[0]["steps"] == 12
    import mlflow

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["lmforge"])
    by_stage = {stage: list(group["status"]) for stage, group in runs.groupby("tags.dvc_stage")}
    assert by_stage == {"pretrain@base": ["FINISHED"], "pretrain@base-12": ["FINISHED"]}
    base_id = runs[runs["tags.dvc_stage"] == "pretrain@base"]["run_id"].iloc[0]
    extended = runs[runs["tags.dvc_stage"] == "pretrain@base-12"].iloc[0]
    assert extended["tags.extends_run_id"] == base_id
    assert extended["params.trainer.max_steps"] == "12"


@pytest.mark.slow
def test_two_runs_of_one_stage_at_once_are_refused(workspace):
    uri = f"sqlite:///{workspace}/twice.db"
    first = _start(workspace, "run_name=twice", "logger=none", "trainer.max_steps=100000", uri=uri)
    stamp = workspace / "artifacts/pretrain/twice/fingerprint.txt"  # written while holding the locks
    deadline = time.time() + 120
    while not stamp.exists() and time.time() < deadline:
        time.sleep(0.1)
    second = _start(workspace, "run_name=twice", "logger=none", "trainer.max_steps=100000", uri=uri)
    try:
        assert second.wait(timeout=120) == 2
        assert second.stderr.read().strip() == (
            "error: stage pretrain@twice is in use by another run; expected one run at a time"
        )
        assert first.poll() is None  # untouched
    finally:
        first.kill()
        first.wait()


@pytest.mark.slow
def test_a_killed_run_that_is_not_continued_is_marked_killed(workspace):
    uri = f"sqlite:///{workspace}/abandon.db"
    run = _start(workspace, "run_name=abandon", "trainer.max_steps=100000", uri=uri)
    last = workspace / "artifacts/pretrain/abandon/last.ckpt"
    deadline = time.time() + 300
    while not last.exists() and time.time() < deadline:
        time.sleep(0.1)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=60)
    again = _start(
        workspace,
        "run_name=abandon",
        "train.resume=false",
        "trainer.max_steps=4",
        "optim.warmup_steps=2",
        uri=uri,
    )
    assert again.wait(timeout=600) == 0, again.stderr.read()[-3000:]
    import mlflow

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(
        experiment_names=["lmforge"], filter_string="tags.dvc_stage = 'pretrain@abandon'"
    )
    assert sorted(runs["status"]) == ["FINISHED", "KILLED"]


@pytest.mark.slow
def test_two_stages_can_create_a_new_mlflow_store_at_once(workspace):
    uri = f"sqlite:///{workspace}/fresh.db"  # does not exist yet: both runs race to create its tables
    short = ["trainer.max_steps=4", "trainer.val_check_interval=2", "optim.warmup_steps=2"]
    runs = [_start(workspace, *short, f"run_name=race{i}", uri=uri) for i in range(2)]
    for run in runs:
        assert run.wait(timeout=600) == 0, run.stderr.read()[-3000:]
    import mlflow

    mlflow.set_tracking_uri(uri)
    finished = mlflow.search_runs(experiment_names=["lmforge"])
    assert sorted(finished["tags.lmforge_job"]) == ["pretrain@race0", "pretrain@race1"]
    assert set(finished["status"]) == {"FINISHED"}


@pytest.mark.slow
def test_ddp_on_two_processes_matches_one_process_at_the_same_global_batch(workspace):
    short = ["trainer.max_steps=12", "trainer.val_check_interval=6", "logger=none", "model.dropout=0.0"]
    one = _start(workspace, *short, "run_name=one", "train.batch_size=8", uri="sqlite:///unused.db")
    assert one.wait(timeout=600) == 0, one.stderr.read()[-3000:]
    two = _start(
        workspace, *short, "run_name=two", "train.batch_size=4", "trainer=ddp_cpu", uri="sqlite:///unused.db"
    )
    assert two.wait(timeout=600) == 0, two.stderr.read()[-3000:]
    (m_one, c_one), (m_two, c_two) = _record(workspace, "one"), _record(workspace, "two")
    assert m_two["tokens_seen"] == m_one["tokens_seen"]
    assert m_two["best_val_loss"] == pytest.approx(m_one["best_val_loss"], rel=1e-4)
    val_one, val_two = (c["val_loss.csv"].splitlines()[1:] for c in (c_one, c_two))
    assert len(val_one) == len(val_two) == 2
    for a, b in zip(val_one, val_two):
        assert [float(x) for x in b.split(",")] == pytest.approx([float(x) for x in a.split(",")], rel=1e-4)
