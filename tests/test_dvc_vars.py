"""A new labelled task is one task yaml plus its row yamls: pipelines/dvc_vars.py derives dvc.yaml's
`tasks` from the rows under conf/, and the committed pipelines/dvc_vars.yaml must agree with conf/.
The slow test adds a tiny local task and its row to a scratch copy of the repository, regenerates
the file there and checks that DVC then schedules the task's stage before `finetune`, and that the
deps test passes for both stages without any edit to dvc.yaml."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_copy import copy_repository

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "pipelines" / "dvc_vars.py"


def generator():
    spec = importlib.util.spec_from_file_location("_dvc_vars", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_dvc_vars_agree_with_conf():
    vars_file = generator()
    expected = vars_file.render(ROOT / "conf")
    assert vars_file.VARS.read_text() == expected, (
        "pipelines/dvc_vars.yaml disagrees with conf/row/ and conf/distill_row/: "
        "run `python pipelines/dvc_vars.py` and commit it"
    )


TINY_TASK = """\
# A tiny local task: the test fixture's TSV folder under a name of its own.
defaults:
  - base
  - _self_
name: tiny
kind: classification
source: local
params:
  path: tests/tasks/fixtures/local_folder
  fields: {id: id, text: sentence, label: polarity}
labels: [negative, positive]
metrics: [accuracy]
val_fraction: 0.25
licence: "CC0 (written for the tests)"
"""

TINY_ROW = """\
# @package _global_
defaults:
  - override /task: tiny
run_name: encoder-tiny
"""


def run(args: list[str], cwd: Path) -> str:
    """`python -m <args>` in `cwd`; its stdout."""
    out = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
def test_a_new_task_and_its_row_enter_the_pipeline(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    (repo / "conf/task/tiny.yaml").write_text(TINY_TASK)
    (repo / "conf/row/encoder-tiny.yaml").write_text(TINY_ROW)
    subprocess.run([sys.executable, "pipelines/dvc_vars.py"], cwd=repo, check=True, timeout=300)

    status = json.loads(run(["dvc", "status", "--json", "finetune", "--with-deps"], repo))
    assert "task@tiny" in status and "finetune" in status  # a fresh copy has no outputs: all must run
    # task@tiny, finetune, finetune_summary, distill_finetune (not the experiments' finetune stages)
    four = "default and (tiny or finetune) and not experiments"
    deps = run(["pytest", "-q", "-p", "no:cacheprovider", "tests/test_dvc_deps.py", "-k", four], repo)
    assert "4 passed" in deps, deps
