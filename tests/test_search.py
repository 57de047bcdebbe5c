"""The Optuna sweeper (src/hydra_plugins/lmforge_optuna) and `python -m scripts.search`: the search
space read from Hydra's sweep syntax, studies that score trials by their recorded metrics, resume from
their journal (a killed trial recorded as FAILED), visit a grid once, skip diverged trials, nest their
trials under the study's MLflow run, and refuse bad settings in one line; and the decoder's search
preset running the real pretrain stage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from helpers import CONF, mlflow_runs
from hydra_plugins.lmforge_optuna.sweeper import search_space
from lmforge.errors import ConfigError

ROOT = CONF.parent

# A stage whose score is known: (x - 0.3)^2, NaN where x > 0.9 (a "diverged" run); the job numbered
# KILL_AT kills its own process, as a kill -9 of the study would.
QUADRATIC = """
import math, os, signal, sys
from hydra.core.hydra_config import HydraConfig
from lmforge.door import cli
from lmforge.errors import LmforgeError
from dataclasses import dataclass
from lmforge.stage import Plan, Stage, StageResult, read
from scripts.search import recorded

@dataclass(frozen=True, kw_only=True, eq=False)
class QuadraticPlan(Plan):
    x: float = read(float)
    seed: int = read(int)
    label: str = read(str)

def work(plan):
    if HydraConfig.get().job.num == int(os.environ.get("KILL_AT", "-1")):
        os.kill(os.getpid(), signal.SIGKILL)
    loss = float("nan") if plan.x > 0.9 else (plan.x - 0.3) ** 2
    return StageResult({"loss": loss, "x": plan.x}, [])

STAGE = Stage("quadratic", work, QuadraticPlan)
if __name__ == "__main__":
    try:
        cli(recorded(STAGE), __file__)
    except LmforgeError as err:  # the sweeper's own refusals, as scripts.search prints them
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
"""

CONFIG = """
defaults:
  - override hydra/sweeper: optuna
  - _self_
x: 0.0
seed: 0
label: a
logger: {enabled: false, tracking_uri: "sqlite:///mlruns.db", experiment: lmforge}
hydra:
  run: {dir: .}
  output_subdir: null
  sweeper:
    study: quadratic
    objective: loss
    n_trials: 6
    n_startup_trials: 2
    params:
      x: interval(0.0, 0.8)
"""


@pytest.fixture
def project(tmp_path) -> Path:
    """A project with one stage, the repository's sweeper config and its own conf/config.yaml."""
    (tmp_path / "conf" / "hydra" / "sweeper").mkdir(parents=True)
    shutil.copy(CONF / "hydra" / "sweeper" / "optuna.yaml", tmp_path / "conf" / "hydra" / "sweeper")
    (tmp_path / "conf" / "config.yaml").write_text(CONFIG)
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "quadratic.py").write_text(QUADRATIC)
    return tmp_path


def study(project: Path, *overrides: str, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "pipelines/quadratic.py", "--multirun", *overrides]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)


def trials(project: Path, name: str = "quadratic") -> dict:
    return json.loads((project / "sweeps" / "search" / name / "study.json").read_text())


def test_search_space_reads_hydras_sweep_syntax_and_the_command_line_wins():
    space, fixed = search_space(
        [
            "optim.lr=tag(log, interval(1e-3, 1e-2))",
            "optim.warmup_steps=int(interval(25, 250))",
            "model.dropout=interval(0, 0.2)",
            "optim.schedule=choice(cosine, linear)",
            "seed=3",
            "optim.warmup_steps=choice(50, 100)",  # later, as the command line comes after the preset
        ]
    )
    assert space == {
        "optim.lr": FloatDistribution(1e-3, 1e-2, log=True),
        "model.dropout": FloatDistribution(0.0, 0.2),
        "optim.schedule": CategoricalDistribution(("cosine", "linear")),
        "optim.warmup_steps": CategoricalDistribution(("50", "100")),
    }
    assert fixed == ["seed=3"]
    assert search_space(["n=int(interval(1, 9))"])[0] == {"n": IntDistribution(1, 9)}


@pytest.mark.parametrize(
    "override, says",
    [
        ("x=interval(0.5, 0.1)", "x: interval(0.5, 0.1) is empty"),
        ("x=tag(log, interval(0, 1))", "not positive on a log scale"),
        ("x=choice(1, 1)", "offers 1 value; expected at least two"),
        ("x=interval(0, ", "hydra.sweeper.params:"),
    ],
)
def test_a_space_that_cannot_be_searched_is_one_line(override, says):
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")) as err:
        search_space([override])
    assert "\n" not in str(err.value)


def test_a_tpe_study_scores_each_trial_by_its_recorded_metric_and_finds_the_minimum(project):
    done = study(project, "hydra.sweeper.n_trials=12", "hydra.sweeper.n_startup_trials=4")
    assert done.returncode == 0, done.stderr[-3000:]
    record = trials(project)
    assert [t["number"] for t in record["trials"]] == list(range(12))
    assert {t["state"] for t in record["trials"]} == {"COMPLETE"}
    for t in record["trials"]:  # each value is the job's own metric, read from its folder
        result = json.loads((project / t["folder"] / "result.json").read_text())
        assert t["value"] == result["loss"] == pytest.approx((t["params"]["x"] - 0.3) ** 2)
        assert t["folder"] == f"sweeps/search/quadratic/{t['number']}"
    assert record["best"]["value"] == min(t["value"] for t in record["trials"])
    assert abs(record["best"]["params"]["x"] - 0.3) < 0.1  # 12 trials of TPE on a 1-D parabola


def test_the_same_command_resumes_a_study_from_its_journal(project):
    assert study(project, "hydra.sweeper.n_trials=2").returncode == 0
    first = trials(project)["trials"]
    assert study(project, "hydra.sweeper.n_trials=4").returncode == 0
    resumed = trials(project)["trials"]
    assert len(resumed) == 4 and resumed[:2] == first


def test_a_killed_study_resumes_with_its_interrupted_trial_failed(project):
    killed = study(project, "hydra.sweeper.n_trials=4", env={"KILL_AT": "1"})
    assert killed.returncode == -9
    assert not (project / "sweeps" / "search" / "quadratic" / "study.json").exists()
    done = study(project, "hydra.sweeper.n_trials=4")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trial 1 was left RUNNING by a study that stopped; recorded as FAILED" in done.stdout + done.stderr
    states = [t["state"] for t in trials(project)["trials"]]
    assert states == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]


def test_a_grid_visits_every_combination_once_and_a_diverged_trial_fails_without_stopping(project):
    done = study(
        project,
        "hydra.sweeper.sampler=grid",
        "hydra.sweeper.n_trials=20",
        "x=choice(0.1, 0.3, 0.95)",
        "label=choice(a, b)",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record = trials(project)["trials"]
    visited = sorted((t["params"]["x"], t["params"]["label"]) for t in record)
    assert visited == sorted((x, label) for x in ("0.1", "0.3", "0.95") for label in ("a", "b"))
    assert {t["state"] for t in record if t["params"]["x"] == "0.95"} == {"FAIL"}  # loss NaN
    assert {t["state"] for t in record if t["params"]["x"] != "0.95"} == {"COMPLETE"}


def test_each_trial_is_an_mlflow_child_of_the_studys_run(project):
    uri = f"sqlite:///{project}/mlruns.db"
    done = study(project, "hydra.sweeper.n_trials=3", "logger.enabled=true")
    assert done.returncode == 0, done.stderr[-3000:]
    runs = mlflow_runs(uri)
    (parent,) = runs[runs["tags.lmforge_level"] == "pipeline"]["run_id"]
    children = runs[runs["tags.mlflow.parentRunId"] == parent]
    assert len(children) == 3
    xs = sorted(float(x) for x in children["params.x"])
    assert xs == sorted(t["params"]["x"] for t in trials(project)["trials"])
    assert set(children["status"]) == {"FINISHED"}


@pytest.mark.parametrize(
    "overrides, says",
    [
        (
            ["hydra.sweeper.sampler=anneal"],
            "hydra.sweeper.sampler: got 'anneal', expected one of tpe, random, grid",
        ),
        (["hydra.sweeper.sampler=grid"], "x: an interval cannot be a grid axis"),
        (["~hydra.sweeper.params.x"], "hydra.sweeper.params: no setting to search"),
        (
            ["hydra.sweeper.objective=accuracy"],
            "hydra.sweeper.objective: trial 0 reported no 'accuracy'; expected one of loss, x",
        ),
        (["hydra.sweeper.n_trials=0"], "hydra.sweeper.n_trials: got 0, expected an integer >= 1"),
    ],
)
def test_bad_sweeper_settings_are_one_line_and_exit_2(project, overrides, says):
    done = study(project, *overrides)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith(f"error: {says}") and "Traceback" not in done.stderr


def test_search_refuses_a_missing_stage_or_multirun_in_one_line():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args, says in (
        (["pretrian"], "search: got 'pretrian', expected a stage first, one of prepare,"),
        (["pretrain", "sweep=search_decoder"], "search: no --multirun;"),
    ):
        done = subprocess.run([sys.executable, "-m", "scripts.search", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 2 and done.stderr.startswith(f"error: {says}"), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_the_decoder_search_preset_runs_the_pretrain_stage(workspace):
    """conf/sweep/search_decoder.yaml with the smoke corpus: two trials of the real stage, each scored
    by the best validation loss its own metrics.json reports, its outputs in its trial folder."""
    command = [
        sys.executable, "-m", "scripts.search", "pretrain", "--multirun", "sweep=search_decoder",
        "experiment=smoke", "logger=none", "data=local", "data.local.path=corpus", "data.sentence_split=regex",
        "tokenizer.vocab_size=600", "trainer.max_steps=4", "trainer.val_check_interval=2",
        "train.checkpoint_every=4", "optim.warmup_steps=int(interval(1, 3))", "hydra.sweeper.n_trials=2",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = trials(workspace, "search_decoder")
    assert len(record["trials"]) == 2 and {t["state"] for t in record["trials"]} == {"COMPLETE"}
    for t in record["trials"]:
        folder = workspace / t["folder"]
        metrics = json.loads((folder / "reports" / "metrics.json").read_text())
        assert t["value"] == metrics["best_val_loss"]
        assert (folder / "artifacts" / "best.ckpt").is_file()
        assert 3e-3 <= t["params"]["optim.lr"] <= 3e-2 and 1 <= t["params"]["optim.warmup_steps"] <= 3


def test_search_table_reads_the_best_after_k_trials_and_compares_seeds_with_an_interval(tmp_path):
    from scripts.search_table import best_so_far, search_table, seeds_table

    def write(name, values, params):
        trials = [
            {"number": i, "state": "FAIL" if v is None else "COMPLETE", "value": v, "params": p}
            for i, (v, p) in enumerate(zip(values, params))
        ]
        best = min((t for t in trials if t["value"] is not None), key=lambda t: t["value"])
        record = {"study": name, "sampler": "grid", "direction": "minimize", "trials": trials, "best": best}
        (tmp_path / name).mkdir()
        (tmp_path / name / "study.json").write_text(json.dumps(record))
        return tmp_path / name

    a = write("a", [5.0, None, 4.0, 4.5], [{"seed": "1"}, {"seed": "9"}, {"seed": "2"}, {"seed": "3"}])
    b = write("b", [5.5, 4.2, 4.6], [{"seed": "1"}, {"seed": "2"}, {"seed": "3"}])
    assert best_so_far(json.loads((a / "study.json").read_text())) == [5.0, 5.0, 4.0, 4.0]
    table = search_table([a, b])
    assert "| a (grid) | 5.000 | 5.000 | 4.000 | #2: seed 2 |" in table  # best of 1, 2, 4
    assert "a: 1 trial(s) failed" in table
    # a - b over seeds 1-3: -0.5, -0.2, -0.1 -> mean -0.267, sd 0.208, t(2) 4.303: half 0.517
    assert seeds_table(a, b).endswith("a − b: -0.267 [-0.784, +0.250], 3 seeds: not distinguishable")
