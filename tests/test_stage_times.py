"""benchmarks/stage_times.py: stage seconds from a time-stamped log, and the log from a real command."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tool():
    sys.path.insert(0, str(ROOT))
    try:
        yield importlib.import_module("benchmarks.stage_times")
    finally:
        sys.path.remove(str(ROOT))


def test_each_stage_runs_until_the_next_one_starts(tool, tmp_path):
    log = tmp_path / "log"
    log.write_text(
        '#stage_times start 100.000 ["make", "repro"]\n'
        "130.000 touch .venv/.installed\n"
        "140.000 Running stage 'prepare':\n"
        "150.500 Stage 'tokenizer@bpe' didn't change, skipping\n"
        "160.000 Running stage 'pretrain@encoder':\n"
        "165.000 some output\n"
        "#stage_times end 400.000 0\n"
    )
    result = tool.table(log)
    assert result["stages"] == [
        {"stage": "prepare", "seconds": 20.0},
        {"stage": "tokenizer@bpe", "seconds": None},
        {"stage": "pretrain@encoder", "seconds": 240.0},
    ]
    assert result["before_first_stage"] == 40.0
    assert result["stages_seconds"] == 260.0
    assert result["total_seconds"] == 300.0
    assert result["command"] == ["make", "repro"] and result["exit_code"] == 0


def test_a_log_it_did_not_write_is_refused(tool, tmp_path):
    log = tmp_path / "log"
    log.write_text("Running stage 'prepare':\n")
    with pytest.raises(tool.BadInput, match="no start and end lines"):
        tool.table(log)


def test_it_times_a_command_and_keeps_its_exit_status(tmp_path):
    script = "import time; print(\"Running stage 'a':\", flush=True); time.sleep(0.3); print(\"Running stage 'b':\"); raise SystemExit(3)"
    log = tmp_path / "log"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.stage_times",
            "--log",
            str(log),
            "--",
            sys.executable,
            "-c",
            script,
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3
    assert "Running stage 'a'" in done.stdout  # echoed
    report = json.loads((tmp_path / "reports/bench/stage_times.json").read_text())
    assert report["cores"] >= 1 and "commit" in report  # the host line of the log
    a, b = report["stages"]
    assert a["stage"] == "a" and 0.25 <= a["seconds"] < 5
    assert b["stage"] == "b" and report["exit_code"] == 3


def test_the_docs_table_puts_a_stage_s_instances_on_one_row(tool):
    result = {
        "stages": [
            {"stage": "prepare", "seconds": 12.4},
            {"stage": "pretrain@encoder", "seconds": 390.0},
            {"stage": "pretrain@decoder", "seconds": 420.0},
            {"stage": "scaling_fit", "seconds": None},
        ],
        "stages_seconds": 822.4,
    }
    assert tool.markdown(result).splitlines() == [
        "| stage | instances | seconds | minutes |",
        "|---|---|---|---|",
        "| prepare |  | 12 | 0.2 |",
        "| pretrain | encoder, decoder | 390, 420 | 13.5 |",
        "| scaling_fit |  | skipped | 0.0 |",
        "| **all stages** | | **822** | **13.7** |",
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store as two `dvc repro` invocations leave it (lmforge/tracking/runs.py's tags), times in ms;
    made once for the module (a new sqlite store migrates its tables for seconds)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlruns.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("lmforge")

    def run(name, start, end=None, parent=None, **tags):
        if parent is not None:
            tags["mlflow.parentRunId"] = parent
        base = 1_700_000_000_000  # a start time of 0 would read as "now"
        made = client.create_run(experiment, start_time=base + start, tags=tags, run_name=name).info.run_id
        if end is not None:
            client.set_terminated(made, end_time=base + end)
        return made

    old = run("dvc repro 1", 0, 50_000, lmforge_level="pipeline", lmforge_invocation="dvc-1")
    sweep = run("scaling_sweep", 10_000, 200_000, parent=old, dvc_stage="scaling_sweep")
    top = run(
        "dvc repro 2",
        100_000,
        None,
        lmforge_level="pipeline",
        lmforge_invocation="dvc-2",
        git_commit="abcdef0123",
        git_dirty="false",
    )
    client.set_tag(sweep, "lmforge_resumed_by", top)  # continued by the second invocation, under the first
    run("prepare", 101_000, 104_500, parent=top, dvc_stage="prepare")
    rows = run("finetune", 105_000, 160_000, parent=top, dvc_stage="finetune")  # the multirun's own run
    run("finetune seed", 106_000, 150_000, parent=rows, dvc_stage="finetune")  # one of its jobs
    run("finetune_summary", 161_000, 162_000, parent=top, dvc_stage="finetune_summary")
    run("finetune_summary", 163_000, 170_000, parent=top, dvc_stage="finetune_summary")  # its 2nd command
    run("findings", 205_000, None, parent=top, dvc_stage="findings")  # still running: not timed
    return uri, top


def test_stage_times_from_the_mlflow_store(tool, store):
    uri, top = store
    result = tool.from_mlflow(None, uri)  # the last pipeline run
    assert result["mlflow_run"] == top and result["commit"] == "abcdef0"
    assert result["stages"] == [
        {"stage": "prepare", "seconds": 3.5},
        {"stage": "finetune", "seconds": 55.0},
        {"stage": "finetune_summary", "seconds": 9.0},  # from its first process's start to its last's end
        {"stage": "scaling_sweep", "seconds": None, "resumed": True},  # started in the first invocation
    ]
    assert result["stages_seconds"] == 99.0  # the first stage's start to the last end (the sweep's)
    assert "| scaling_sweep |  | resumed | 0.0 |" in tool.markdown(result)
    with pytest.raises(tool.BadInput, match="'nope' is not in"):
        tool.from_mlflow("nope", uri)


def test_an_unknown_run_is_one_line_and_exit_2(store):
    uri, _ = store
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.stage_times", "--mlflow", "0123"],
        cwd=ROOT,
        env={**os.environ, "MLFLOW_TRACKING_URI": uri},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: run '0123' is not in {uri}; expected a pipeline run's id (--mlflow alone takes the last)"
    ]
