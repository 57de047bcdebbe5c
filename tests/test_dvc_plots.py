"""`dvc plots show` draws every column of the fine-tuning curves, a line per seed.

A row's curve (`reports/<stage>/curves/<row>.csv`: seed, step, then the validation loss and the task's
scores) holds every seed of the row. The stage's own plot draws its loss with the `seeds` template
(.dvc/plots/seeds.json: DVC's simple line plot with a line per seed, where DVC's default joins them);
the `plots:` section at the top of each dvc.yaml draws each task's scores. A column no panel names is
a curve the user never sees: DVC's default draws only a file's last column.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ["dvc.yaml", "pipelines/experiments/dvc.yaml"]
INDEX = {"seed", "step"}  # the x axis and the line each point belongs to


def instances(stage: dict) -> list[dict]:
    """A stage's definitions as DVC expands them: a `foreach` stage's `do` once per key (a dict's) or
    item (a list's), `${key}` and `${item}` filled in; a `matrix` stage once per combination of its
    lists, `${item.<name>}` filled in; any other stage as it is."""
    if "foreach" in stage:
        text = json.dumps(stage["do"])
        keys = stage["foreach"] if isinstance(stage["foreach"], (dict, list)) else []
        return [json.loads(text.replace("${key}", str(k)).replace("${item}", str(k))) for k in keys]
    if "matrix" in stage:
        names, lists = zip(*stage["matrix"].items())
        text = json.dumps({k: v for k, v in stage.items() if k != "matrix"})
        found = []
        for values in itertools.product(*lists):
            filled = text
            for name, value in zip(names, values):
                filled = filled.replace(f"${{item.{name}}}", str(value))
            found.append(json.loads(filled))
        return found
    return [stage]


def curve_plots(pipeline: dict) -> dict[str, dict]:
    """{path: its plot's properties} for each stage plot of curves: a folder `.../curves` or one
    row's `.../curves/<row>.csv` (a stage per row)."""
    found = {}
    for stage in pipeline["stages"].values():
        for instance in instances(stage):
            for entry in instance.get("plots", []):
                for path, props in (entry if isinstance(entry, dict) else {entry: {}}).items():
                    if path.endswith("/curves") or Path(path).parent.name == "curves":
                        found[path] = props or {}
    return found


def drawn(pipeline: dict, plots: dict[str, dict]) -> dict[str, set[str]]:
    """{curve file: the columns some panel draws}: its stage's y, and the top-level panels' y. A
    curve not written yet (its stage has not run) has nothing to check."""
    out: dict[str, set[str]] = {}
    for path, props in plots.items():
        files = sorted((ROOT / path).glob("*.csv")) if path.endswith("/curves") else [ROOT / path]
        for csv_file in (f for f in files if f.is_file()):
            out[str(csv_file.relative_to(ROOT))] = {props["y"]} if "y" in props else set()
    for panel in pipeline.get("plots", []):
        (props,) = panel.values() if isinstance(panel, dict) else ({},)
        for path, fields in (props.get("y") or {}).items():
            out.setdefault(path, set()).update([fields] if isinstance(fields, str) else fields)
    return out


@pytest.mark.parametrize("name", PIPELINES)
def test_every_column_of_every_curve_is_drawn_a_line_per_seed(name):
    pipeline = yaml.safe_load((ROOT / name).read_text())
    plots = curve_plots(pipeline)
    assert plots, f"{name}: no stage plots curves"
    for path, props in plots.items():
        assert props.get("template") == "seeds" and props.get("x") == "step", path
    panels = [next(iter(p.values())) for p in pipeline.get("plots", []) if isinstance(p, dict)]
    for props in panels:
        if any("/curves/" in path for path in props.get("y", {})):
            assert props.get("template") == "seeds" and props.get("x") == "step", props
    written = {p for p in plots if not p.endswith("/curves")}
    folders = {p for p in plots if p.endswith("/curves")}
    shown = drawn(pipeline, plots)
    stale = json.loads((ROOT / "pipelines/experiments/stale.json").read_text())["stages"]
    lagging = [out for stage in stale.values() for out in stage["outs"]]
    missing = []
    for path, columns in shown.items():
        by_a_stage = path in written or str(Path(path).parent) in folders
        assert by_a_stage, f"{name}: a panel names {path}, which no stage writes"
        if not (ROOT / path).is_file():
            continue  # its stage has not run yet: nothing to check
        if any(path == o or path.startswith(o.rstrip("/") + "/") for o in lagging):
            continue  # written by an experiment that lags the code (stale.json): an older config's columns
        with open(ROOT / path) as f:
            header = next(csv.reader(f))
        assert INDEX <= set(header), f"{path}: {header}"
        missing += [f"{path}: {col}" for col in header if col not in INDEX and col not in columns]
        assert columns <= set(header), f"{path}: panels name {sorted(columns - set(header))}, not in {header}"
    assert not missing, f"{name}: columns no panel draws: " + "; ".join(missing)


def test_the_seeds_template_is_dvc_s_simple_plot_with_a_line_per_seed():
    from dvc_render.vega_templates import SimpleLinearTemplate

    ours = json.loads((ROOT / ".dvc/plots/seeds.json").read_text())
    assert ours["encoding"].pop("detail") == {"field": "seed", "type": "nominal"}
    assert ours["mark"].pop("point") is True
    assert ours == SimpleLinearTemplate.DEFAULT_CONTENT  # every anchor DVC fills is kept


def test_dvc_renders_each_seed_as_its_own_line(tmp_path):
    """`dvc plots show` with the seeds template on a curve of two seeds: both in the data, `seed` the
    detail channel (a line each); the same file with DVC's default template has no such channel."""
    for args in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(args, cwd=tmp_path, check=True)
    (tmp_path / ".dvc/plots").mkdir(exist_ok=True)
    (tmp_path / ".dvc/plots/seeds.json").write_text((ROOT / ".dvc/plots/seeds.json").read_text())
    (tmp_path / "curves").mkdir()
    (tmp_path / "curves/row.csv").write_text(
        "seed,step,val/loss,val/accuracy\n0,10,0.9,0.5\n0,20,0.7,0.6\n1,10,0.8,0.55\n1,20,0.6,0.65\n"
    )
    (tmp_path / "dvc.yaml").write_text(
        "plots:\n"
        "  - scores:\n      template: seeds\n      x: step\n      y: {curves/row.csv: [val/accuracy, val/loss]}\n"
        "  - curves/row.csv: {x: step}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "dvc", "plots", "show", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(done.stdout)["data"]
    (ours,) = data["scores"]
    assert ours["content"]["encoding"]["detail"] == {"field": "seed", "type": "nominal"}
    values = ours["content"]["data"]["values"]
    assert {(v["seed"], v["field"]) for v in values} == {
        (seed, col) for seed in "01" for col in ("val/accuracy", "val/loss")
    }
    (default,) = data["curves/row.csv"]  # DVC's default: the last column alone, the seeds joined
    spec = {key: value for key, value in default["content"].items() if key != "data"}
    fields = set(re.findall(r'"field": "([^"]+)"', json.dumps(spec)))
    assert "val/accuracy" in fields and "val/loss" not in fields and '"detail"' not in json.dumps(spec)
