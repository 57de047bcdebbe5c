"""The speedrun ablation's run lengths and table (scripts/ablation.py) against hand computations, from a
made-up knob_cost report and made-up validation curves (the runs themselves are pretrain stages)."""

from __future__ import annotations

import importlib
import json
import math
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def ablation(monkeypatch, tmp_path):
    """scripts/ablation.py, imported from the repository root, with its report and runs under tmp_path."""
    monkeypatch.syspath_prepend(str(ROOT))
    module = importlib.import_module("scripts.ablation")
    monkeypatch.setattr(module, "KNOB_COST", tmp_path / "knob_cost.json")
    monkeypatch.setattr(module, "RUNS", tmp_path / "runs")
    return module


def write_cost(path: Path, family: str, default: float, knobs: dict[str, float]) -> None:
    rows = [
        {"name": f"{family} {knob}", "extra": {"seconds_per_step": s, "default_seconds_per_step": default}}
        for knob, s in knobs.items()
    ]
    path.write_text(json.dumps({"rows": rows}))


def parsed(line: str) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in shlex.split(line)[3:])


def test_stack_rows_are_the_stack_then_the_stack_less_each_knob(ablation):
    assert ablation.stack_rows(["muon", "wsd"]) == ["muon+wsd", "wsd", "muon"]
    assert ablation.stack_rows(["muon"]) == ["muon", "default"]


def test_unknown_knob_is_one_line(ablation):
    with pytest.raises(SystemExit, match="knob 'muonn' is not one of muon, qk_norm"):
        ablation.knob_overrides("muon+muonn")
    assert ablation.knob_overrides("qk_norm+relu2") == ["model.qk_norm=true", "model.activation=relu2"]


def test_run_lengths_follow_the_measured_cost(ablation):
    # softcap 0.40 s against 0.30: 1000 * 0.75 = 750 steps, validated every 75; qk_norm measured
    # cheaper than the default (noise) keeps 1000; wsd leaves the step as it is, so 1000 whatever measured
    write_cost(ablation.KNOB_COST, "decoder", 0.30, {"softcap": 0.40, "qk_norm": 0.29, "wsd": 0.35})
    lines = ablation.commands("decoder", ["default", "softcap", "qk_norm", "wsd"], [1234, 1], 1000)
    assert len(lines) == 8
    runs = {p["run_name"]: p for p in map(parsed, lines)}
    assert runs["abl-decoder-softcap-s1"]["trainer.max_steps"] == "750"
    assert runs["abl-decoder-softcap-s1"]["trainer.val_check_interval"] == "75"
    assert runs["abl-decoder-softcap-s1"]["model.logit_softcap"] == "15"
    assert runs["abl-decoder-qk_norm-s1234"]["trainer.max_steps"] == "1000"
    assert runs["abl-decoder-wsd-s1234"]["trainer.max_steps"] == "1000"
    assert runs["abl-decoder-default-s1234"]["seed"] == "1234"
    assert runs["abl-decoder-default-s1234"]["model"] == "gpt_micro"  # dvc.yaml's families
    assert lines[0].startswith("python pipelines/pretrain.py sweep=recipe ")
    # a stack of softcap and the schedule costs what softcap does: no measurement is run for it
    stack = {p["run_name"]: p for p in map(parsed, ablation.commands("decoder", ["softcap+wsd"], [1], 1000))}
    assert stack["abl-decoder-softcap+wsd-s1"]["trainer.max_steps"] == "750"
    assert stack["abl-decoder-softcap+wsd-s1"]["optim.schedule"] == "wsd"


def test_missing_report_is_one_line(ablation):
    with pytest.raises(
        SystemExit, match="knob_cost.json is missing; run `python -m benchmarks --only knob_cost`"
    ):
        ablation.measured_seconds("decoder")


def write_run(root: Path, name: str, curve: list[tuple[int, float]]) -> None:
    reports = root / name / "reports"
    reports.mkdir(parents=True)
    (reports / "metrics.json").write_text("{}")
    (reports / "val_loss.csv").write_text(
        "step,val_loss,val_accuracy\n" + "".join(f"{s},{v},0.1\n" for s, v in curve)
    )


def test_table_pairs_by_seed_and_times_the_target(ablation):
    runs = ablation.RUNS
    write_run(runs, "abl-decoder-default-s1234", [(500, 6.0), (1000, 5.0)])
    write_run(runs, "abl-decoder-default-s1", [(500, 6.2), (1000, 5.2)])
    write_run(runs, "abl-decoder-softcap-s1234", [(375, 5.5), (750, 4.9)])
    write_run(runs, "abl-decoder-softcap-s1", [(375, 5.7), (750, 5.0)])
    text = ablation.table("decoder")
    row = next(line for line in text.splitlines() if line.startswith("| softcap |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:5] == ["750", "5.000", "4.900", "4.950"]  # steps, seed 1, seed 1234, mean
    # differences -0.1 and -0.2: mean -0.15, sd 0.0707, t(0.975, 1) = 12.706 -> half 0.635
    assert cells[5] == "-0.150 [-0.785, +0.485]: not distinguishable"
    # each seed's target is its default's last loss. Seed 1234, 5.0: softcap passes it between 5.5 at
    # 375 and 4.9 at 750, at 375 + 375 * 0.5 / 0.6 = 687.5 of its 750 steps; seed 1, 5.2: between 5.7
    # at 375 and 5.0 at 750, at 375 + 375 * 0.5 / 0.7
    speed_up = (750 / 687.5 + 750 / (375 + 375 * 0.5 / 0.7)) / 2
    assert cells[6] == f"{speed_up:.2f}×"
    assert math.isclose(speed_up, 1.13, abs_tol=0.01)
    default = next(line for line in text.splitlines() if line.startswith("| default |"))
    assert default.rstrip(" |").endswith("| 1")
    write_run(runs, "abl-decoder-wsd-s1234", [(500, 6.0), (1000, 5.5)])  # never reaches 5.0
    write_run(runs, "abl-decoder-wsd-s1", [(500, 6.0), (1000, 5.1)])
    wsd = next(line for line in ablation.table("decoder").splitlines() if line.startswith("| wsd |"))
    assert "1 of 2 seeds not reached" in wsd
    write_run(runs, "abl-decoder-muon-s1234", [(500, 5.5), (1000, 4.8)])  # one seed: no interval
    muon = next(line for line in ablation.table("decoder").splitlines() if line.startswith("| muon |"))
    assert "| -0.200 (one seed: no interval) |" in muon


def test_table_without_the_default_runs_is_one_line(ablation):
    write_run(ablation.RUNS, "abl-decoder-softcap-s1", [(750, 5.0)])
    with pytest.raises(SystemExit, match="no finished run of the default decoder recipe"):
        ablation.table("decoder")


def test_table_of_other_runs_against_a_named_row(ablation):
    """`--prefix v3-encoder- --default d128`: a study outside the knob ablation, each row against the
    row it names, the `abl-` runs left out."""
    write_run(ablation.RUNS, "abl-encoder-default-s1", [(800, 9.0)])
    write_run(ablation.RUNS, "v3-encoder-d128-s1", [(800, 5.0)])
    write_run(ablation.RUNS, "v3-encoder-d96-s1", [(550, 5.2), (1100, 4.8)])
    text = ablation.table("encoder", prefix="v3-encoder-", default="d128")
    rows = [
        line.split("|")[1].strip()
        for line in text.splitlines()
        if line.startswith("| ") and "---" not in line
    ]
    assert rows == ["row", "d128", "d96"]
    d96 = next(line for line in text.splitlines() if line.startswith("| d96 |"))
    assert "| -0.200 (one seed: no interval) |" in d96
    with pytest.raises(SystemExit, match="no finished run of the d256 encoder recipe"):
        ablation.table("encoder", prefix="v3-encoder-", default="d256")
