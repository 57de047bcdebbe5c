"""`dvc plots show` draws every column of the fine-tuning curves, a line per seed.

A row's curve (`reports/<stage>/curves/<row>.csv`: seed, step, then the validation loss and the task's
scores) holds every seed of the row. The stage's own plot draws its loss with the `seeds` template
(.dvc/plots/seeds.json: DVC's simple line plot with a line per seed, where DVC's default joins them);
the `plots:` section at the top of each dvc.yaml draws each task's scores. A column no panel names is
a curve the user never sees: DVC's default draws only a file's last column.
"""

from __future__ import annotations

import csv
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


def curve_folders(pipeline: dict) -> dict[str, dict]:
    """{folder: its plot's properties} for each stage whose plots name a folder of curves."""
    found = {}
    for stage in pipeline["stages"].values():
        for entry in stage.get("plots", []):
            for path, props in (entry if isinstance(entry, dict) else {entry: {}}).items():
                if path.endswith("/curves"):
                    found[path] = props or {}
    return found


def drawn(pipeline: dict, folders: dict[str, dict]) -> dict[str, set[str]]:
    """{curve file: the columns some panel draws}: its stage's y, and the top-level panels' y."""
    out: dict[str, set[str]] = {}
    for folder, props in folders.items():
        for csv_file in sorted((ROOT / folder).glob("*.csv")):
            out[str(csv_file.relative_to(ROOT))] = {props["y"]} if "y" in props else set()
    for panel in pipeline.get("plots", []):
        (props,) = panel.values() if isinstance(panel, dict) else ({},)
        for path, fields in (props.get("y") or {}).items():
            out.setdefault(path, set()).update([fields] if isinstance(fields, str) else fields)
    return out


@pytest.mark.parametrize("name", PIPELINES)
def test_every_column_of_every_curve_is_drawn_a_line_per_seed(name):
    pipeline = yaml.safe_load((ROOT / name).read_text())
    folders = curve_folders(pipeline)
    assert folders, f"{name}: no stage plots a folder of curves"
    for folder, props in folders.items():
        assert props.get("template") == "seeds" and props.get("x") == "step", folder
    panels = [next(iter(p.values())) for p in pipeline.get("plots", []) if isinstance(p, dict)]
    for props in panels:
        if any("/curves/" in path for path in props.get("y", {})):
            assert props.get("template") == "seeds" and props.get("x") == "step", props
    shown = drawn(pipeline, folders)
    missing = []
    for path, columns in shown.items():
        assert (ROOT / path).is_file(), f"{name}: a panel names {path}, which is not there"
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
