"""scripts/metrics.py: `dvc metrics show`'s values, a table per stage of one dvc.yaml."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import metrics

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "scripts/metrics.py"


@pytest.fixture(scope="module")
def tool():
    return metrics


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], cwd=ROOT, capture_output=True, text=True)


def test_a_table_has_a_row_per_key_and_a_column_per_file_and_rev(tool):
    values = {
        "workspace": {"a.json": {"loss": 1.23456789, "n": 3}, "b.json": {"loss": 2.0, "extra.x": "s"}},
        "HEAD": {"a.json": {"loss": 1.5}},
    }
    lines = tool.table([("a", "a.json"), ("b", "b.json")], values, ["workspace", "HEAD"])
    assert lines == [
        "| metric | a (workspace) | a (HEAD) | b (workspace) | b (HEAD) |",
        "|---|---|---|---|---|",
        "| loss | 1.2346 | 1.5 | 2 | - |",
        "| n | 3 | - | - | - |",
        "| extra.x | - | - | s | - |",
    ]
    assert tool.table([("a", "a.json")], values, ["workspace"])[0] == "| metric | a |"
    assert tool.flatten({"a": {"b": 1, "c": {"d": 2}}, "e": 3}) == {"a.b": 1, "a.c.d": 2, "e": 3}


def test_each_metrics_file_is_in_one_group_of_its_stage(tool):
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        default = tool.groups(repo, "dvc.yaml")
        experiments = tool.groups(repo, "pipelines/experiments/dvc.yaml")
        declared = {
            str(out.def_path): stage.dvcfile.relpath
            for stage in repo.index.stages
            for out in stage.outs
            if out.metric
        }
    assert default["evaluate"] == [
        ("encoder", "reports/eval/encoder.json"),
        ("decoder", "reports/eval/decoder.json"),
        ("encoder_decoder", "reports/eval/encoder_decoder.json"),
    ]
    assert default["bench/train_step"] == [("reports/bench/train_step.json", "reports/bench/train_step.json")]
    assert "evaluate" not in experiments and "arch_pretrain" in experiments
    for pipeline, found in (("dvc.yaml", default), ("pipelines/experiments/dvc.yaml", experiments)):
        paths = [
            path for name, columns in found.items() if not name.startswith("bench/") for _, path in columns
        ]
        assert sorted(paths) == sorted(p for p, where in declared.items() if where == pipeline)


def test_the_tool_prints_the_files_values(tmp_path):
    done = run("evaluate", "--rev", "HEAD")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "## evaluate"
    encoder = json.loads((ROOT / "reports/eval/encoder.json").read_text())
    row = next(line for line in lines if line.startswith("| test_loss |"))
    assert row.split(" | ")[1] == f"{encoder['test_loss']:.5g}"  # the workspace's value, first column
    assert "encoder (workspace) | encoder (HEAD)" in lines[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "error: no metrics for stage(s) nope in dvc.yaml; expected one of: prepare, "),
        (["--pipeline", "nope.yaml"], "error: --pipeline nope.yaml: no such file; expected a dvc.yaml"),
        (["evaluate", "--rev", "no-such-rev"], "error: --rev: unknown Git revision 'no-such-rev'; expected"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    done = run(*args)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(message) and not done.stdout
