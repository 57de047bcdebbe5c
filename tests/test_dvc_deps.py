"""Both dvc.yaml files are generated (scripts/dvc_yaml.py), and what they say is what DVC does.

- The committed dvc.yaml files equal what the generator writes from their templates
  (pipelines/stages.yaml, pipelines/experiments/stages.yaml), which stay short and list data only.
- The generator's parts against tiny references: the import closure (function-level imports, parent
  packages, observing modules left out), folding files into folders, templating a foreach stage's
  config files, the composed config files of a stage.
- Every stage instance DVC expands from the committed files, under every experiment overlay, depends
  on everything it reads and on nothing it does not: DVC's expansion of the generated `${...}`
  templates is checked against the generator's per-instance computation.
- Slow, in a scratch copy of the working tree: dvc.lock records the current code and config; with
  the lock brought up to date, appending a line to src/lmforge/model/config.py, to
  src/lmforge/training/objectives.py, then to conf/config.yaml marks exactly the stages that read
  it; appending one to an observing module marks none; a Python bytecode cache marks none; a new
  task and its row enter the pipeline through the generator alone.

`python tests/test_dvc_deps.py` prints what each stage reads.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from dvc.dependency.param import ParamsDependency
from dvc.repo import Repo
from repo_copy import copy_repository

from lmforge import codebase
from scripts import dvc_yaml
from scripts.dvc_yaml import (
    GROUP_FILE,
    OBSERVABILITY,
    PIPELINES,
    ROOT,
    SRC,
    command_reads,
    composed_files,
    fold,
    import_closure,
    imported_names,
    is_code,
    rel,
    swept,
    template_path,
    uncached_reports,
)
from scripts.relock import code_status, record_code_deps

# The hand-kept part of each dvc.yaml (issue 51): what only a person can say, in at most 300 lines.
TEMPLATE_LINES = {"pipelines/stages.yaml": 300, "pipelines/experiments/stages.yaml": 300}


def test_reports_are_never_cached_and_a_template_cannot_say_otherwise():
    """Reports are committed to git: the generator gives each output, metric and plot under reports/
    its `cache: false`, keeps a plot's options and a comment after the entry, and leaves other outputs."""
    from ruamel.yaml import YAML

    text = (
        "outs: [artifacts/x, reports/a.md]\n"
        "metrics:\n  - reports/m.json  # a note\n"
        "plots: [{reports/c.csv: {x: step, y: loss}}, {sweeps/s: {cache: false}}]\n"
    )
    body = YAML().load(text)
    uncached_reports(body, "t")
    assert json.loads(json.dumps(body)) == {
        "outs": ["artifacts/x", {"reports/a.md": {"cache": False}}],
        "metrics": [{"reports/m.json": {"cache": False}}],
        "plots": [
            {"reports/c.csv": {"x": "step", "y": "loss", "cache": False}},
            {"sweeps/s": {"cache": False}},
        ],
    }
    with pytest.raises(SystemExit, match="t: outs reports/b.md: cache is generated"):
        uncached_reports(YAML().load("outs: [{reports/b.md: {cache: false}}]\n"), "t")


class DvcStage(NamedTuple):
    commands: list[list[str]]  # each command of the stage, split
    deps: list[str]  # dep paths, relative to the repository root
    params: list[str]  # the files of its `params:` section


def current_experiment() -> str:
    return yaml.safe_load((ROOT / "params.yaml").read_text())["experiment"]


@cache
def experiments() -> tuple[str, ...]:
    return tuple(dvc_yaml.experiments())


@cache
def stages(experiment: str) -> dict[str, DvcStage]:
    """The stage instances DVC sees in the committed files (foreach expanded) when params.yaml
    selects `experiment`, as after `dvc exp run -S experiment=<name>`; DVC reads a scratch copy."""
    with tempfile.TemporaryDirectory() as tmp:
        for pipeline in PIPELINES:
            (Path(tmp) / pipeline).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / pipeline, Path(tmp) / pipeline)
        params = yaml.safe_load((ROOT / "params.yaml").read_text())
        (Path(tmp) / "params.yaml").write_text(yaml.safe_dump({**params, "experiment": experiment}))
        repo = Repo(tmp, uninitialized=True, config={"core": {"no_scm": True}})
        try:
            found = {}
            for s in repo.index.stages:
                commands = s.cmd if isinstance(s.cmd, list) else [s.cmd]
                wdir = Path(s.wdir).resolve().relative_to(Path(tmp).resolve())
                paths = {
                    d: (wdir / d.def_path).as_posix() if str(wdir) != "." else d.def_path for d in s.deps
                }
                deps = [p for d, p in paths.items() if not isinstance(d, ParamsDependency)]
                params = [p for d, p in paths.items() if isinstance(d, ParamsDependency)]
                pipeline = Path(s.dvcfile.path).resolve().relative_to(Path(tmp).resolve()).as_posix()
                name = s.name if pipeline == "dvc.yaml" else f"{pipeline}:{s.name}"  # as dvc status names it
                found[name] = DvcStage([shlex.split(c) for c in commands], deps, params)
            return found
        finally:
            repo.close()


@cache
def required(experiment: str, name: str) -> frozenset[Path]:
    """The code and config files stage instance `name` reads, from its expanded commands."""
    return frozenset(set().union(*(command_reads(words) for words in stages(experiment)[name].commands)))


def covers(dep: Path, path: Path) -> bool:
    return path == dep or path.is_relative_to(dep)


def check(deps: list[str], need: frozenset[Path], whole: set[str] = frozenset()) -> list[str]:
    """What is wrong with a stage's `deps` given the files `need` it reads: a file it reads that no
    dep covers, a code dep that does not exist or that covers nothing it reads, a folder dep with a
    source file it does not read (but the folders in `whole`, whose listing its command sweeps)."""
    missing = sorted(rel(p) for p in need if not any(covers(ROOT / d, p) for d in deps))
    absent = sorted(d for d in deps if is_code(d) and not (ROOT / d).exists())
    unread = sorted(d for d in deps if is_code(d) and not any(covers(ROOT / d, p) for p in need))
    coarse = sorted(
        d
        for d in deps
        if is_code(d) and (ROOT / d).is_dir() and d not in unread and d not in whole
        if any(p not in need for p in dvc_yaml.source_files(ROOT / d))
    )
    found = {
        "lacks deps": missing,
        "lists deps that do not exist": absent,
        "lists deps it never reads": unread,
        "lists folders with files it never reads": coarse,
    }
    return [f"{what} {paths}" for what, paths in found.items() if paths]


# -- the generated files ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return dvc_yaml.render()


@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_committed_dvc_yaml_is_what_the_generator_writes(generated, pipeline):
    assert (ROOT / pipeline).read_text() == generated[pipeline], (
        f"{pipeline} differs from its template {PIPELINES[pipeline]}: run `python -m scripts.dvc_yaml` "
        "and commit it"
    )


@pytest.mark.parametrize("template", list(PIPELINES.values()))
def test_templates_are_short_and_list_data_only(template):
    text = (ROOT / template).read_text()
    limit = TEMPLATE_LINES[template]
    assert len(text.splitlines()) <= limit, f"{template}: the hand-kept part grew past {limit} lines"
    for name, stage in yaml.safe_load(text)["stages"].items():
        body = stage.get("do", stage)
        assert "params" not in body, f"{template}: {name}: params are generated"
        assert not [d for d in body.get("deps", []) if is_code(d)], (
            f"{template}: {name}: code deps are generated"
        )


@pytest.mark.parametrize(
    "experiment, name", [(e, n) for e in experiments() for n in stages(e)], ids=lambda v: v
)
def test_stage_depends_on_everything_it_reads(experiment, name):
    stage = stages(experiment)[name]
    found = check(stage.deps, required(experiment, name), swept(stage.commands))
    assert not found, f"dvc.yaml: stage {name} (experiment={experiment}) " + "; ".join(found)


@pytest.mark.parametrize("name", list(stages("default")), ids=lambda v: v)
def test_params_list_the_config_group_files_the_stage_reads(name):
    """`dvc exp show` and `dvc params diff` show a stage's knobs: the group files among its deps (not
    the primary config, the paths or the experiment overlay), each once."""
    stage = stages("default")[name]
    assert stage.params == list(dict.fromkeys(d for d in stage.deps if GROUP_FILE.match(d))), name


# -- the generator's parts against tiny references --------------------------------------------------


def test_imports_are_found_anywhere_and_resolved():
    source = "import os\nfrom . import masks\ndef f():\n    from lmforge.model.config import ModelConfig\n"
    assert imported_names(source, "lmforge.model") == {
        "os",
        "lmforge.model",
        "lmforge.model.masks",
        "lmforge.model.config",
        "lmforge.model.config.ModelConfig",
    }


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_closure_follows_parents_and_leaves_observing_modules_out(tmp_path, monkeypatch):
    monkeypatch.setattr(codebase, "OBSERVABILITY", ("pkg.watch",))  # the walk is lmforge.codebase's
    _write(
        tmp_path / "src",
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "def f():\n    from pkg.sub import b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "from pkg.watch import log\n",
            "pkg/watch/__init__.py": "from pkg import unused\n",
            "pkg/unused.py": "",
        },
    )
    entry = tmp_path / "entry.py"
    entry.write_text("from pkg.a import f\n")
    closure = {p.relative_to(tmp_path / "src").as_posix() for p in import_closure(entry, tmp_path / "src")}
    assert closure == {"pkg/__init__.py", "pkg/a.py", "pkg/sub/__init__.py", "pkg/sub/b.py"}


def test_a_folder_stands_for_its_files_only_when_all_are_read(tmp_path):
    _write(tmp_path, {"a/x.py": "", "a/y.py": "", "a/b/z.py": "", "a/b/w.yaml": "", "c.py": ""})
    read = [tmp_path / p for p in ("a/x.py", "a/b/z.py", "a/b/w.yaml", "c.py")]
    assert fold(read, tmp_path, tmp_path) == ["a/b", "a/x.py", "c.py"]


def test_an_instance_value_becomes_its_variable():
    values = {"experiment": "smoke", "key": "decoder", "item.model": "gpt_micro", "item.trainer": "cpu"}
    assert template_path("conf/model/gpt_micro.yaml", values) == "conf/model/${item.model}.yaml"
    assert template_path("conf/experiment/smoke.yaml", values) == "conf/experiment/${experiment}.yaml"
    assert template_path("conf/interpret/decoder.yaml", values) == "conf/interpret/${key}.yaml"
    assert template_path("conf/model/base.yaml", values) == "conf/model/base.yaml"
    assert template_path("conf/row/encoder-pos.yaml", {"item": "pos"}) == "conf/row/encoder-${item}.yaml"
    assert template_path("src/lmforge/model/config.py", values) == "src/lmforge/model/config.py"


def test_the_composed_files_follow_nested_defaults_and_interpolations():
    experiment = current_experiment()
    pretrain = {rel(p) for p in required(experiment, "pretrain@encoder")}
    assert {"conf/config.yaml", f"conf/experiment/{experiment}.yaml", "conf/model/base.yaml"} <= pretrain
    assert {
        "conf/model/bert_micro_rope.yaml",
        "conf/trainer/cpu.yaml",
        "conf/trainer/cpu_encoder_micro.yaml",
    } <= pretrain
    assert not {"conf/eval/default.yaml", "conf/logger/mlflow.yaml", "conf/data/brown.yaml"} & pretrain
    assert "src/lmforge/model/config.py" in pretrain
    assert "src/lmforge/evaluation/evaluate.py" not in pretrain  # evaluation code is not pretraining's
    assert "conf/data/brown.yaml" in {rel(p) for p in required(experiment, "prepare")}
    files = {rel(p) for p in composed_files(["model=gpt_micro"], frozenset({"model"}))}
    assert files == {"conf/config.yaml", "conf/model/base.yaml", "conf/model/gpt_micro.yaml"}
    widened = {rel(p) for p in composed_files(["model=gpt_micro"], frozenset({"train"}))}
    assert "conf/paths/default.yaml" in widened  # train.out_dir: ${paths.artifacts}/...


def test_the_check_rejects_missing_unread_and_too_coarse_deps():
    experiment = current_experiment()
    deps, need = stages(experiment)["pretrain@decoder"].deps, required(experiment, "pretrain@decoder")
    assert check(deps, need) == []
    without_config = [d for d in deps if d != "src/lmforge/model/config.py"]
    assert "src/lmforge/model/config.py" in check(without_config, need)[0]  # lacks deps [...]
    assert check([*deps, "src/lmforge/evaluation"], need) == [
        "lists deps it never reads ['src/lmforge/evaluation']"
    ]
    assert check([*deps, "conf/eval/default.yaml"], need) == [
        "lists deps it never reads ['conf/eval/default.yaml']"
    ]
    coarse = check([*deps, "src/lmforge"], need)  # covers everything the stage reads, and far more
    assert coarse == ["lists folders with files it never reads ['src/lmforge']"]


# -- DVC itself, in a scratch copy ------------------------------------------------------------------

EXPERIMENTS = "pipelines/experiments/dvc.yaml"


@pytest.mark.slow
def test_dvc_lock_records_the_current_code_and_config(tmp_path):
    """The default pipeline is fresh at every commit: its lock records today's code and config."""
    stale = {
        stage: paths
        for stage, paths in code_status(copy_repository(tmp_path / "repo")).items()
        if not stage.startswith(EXPERIMENTS)
    }
    if stale:
        lines = [
            f"dvc.lock is stale for {stage}: {', '.join(sorted(paths))}" for stage, paths in stale.items()
        ]
        pytest.fail("; run dvc repro and commit dvc.lock\n".join([*lines, ""]), pytrace=False)


@pytest.mark.slow
def test_every_stale_experiment_is_marked_where_its_numbers_are_read(tmp_path):
    """The experiments may lag the code, never silently: stale.json (which `findings` reads) and the
    docs' blocks say what `make status` computes from the locks and the code, in a clean copy."""
    from lmforge.freshness import marks
    from lmforge.freshness.status import compute

    repo = copy_repository(tmp_path / "repo")
    status = compute(repo)
    assert not [o.id for o in status.owed if not o.id.startswith(EXPERIMENTS)], "the default pipeline lags"
    wrong = marks.out_of_date(repo, status)
    assert not wrong, f"stale marks out of date in {wrong}: run `make status WRITE=1` and commit"
    # findings.md comes from the current stale.json (a dep of `findings`: the default lock test pins
    # it), and shows each mark it read
    lagging = json.loads((ROOT / marks.STALE_FILE).read_text())["stages"]
    findings = json.loads((ROOT / "reports/findings.json").read_text())["claims"]
    report = (ROOT / "reports/findings.md").read_text()
    for key, claim in findings.items():
        for stage, mark in claim["stale"].items():
            assert lagging[stage]["mark"] == mark and f"**Stale** (`{stage}`): {mark}." in report, key


def readers(path: str) -> set[str]:
    """The stage instances (of both pipelines, under the current overlay) that read `path`."""
    experiment = current_experiment()
    return {n for n in stages(experiment) if ROOT / path in required(experiment, n)}


def observing_files() -> list[Path]:
    """The files of the observing modules (`OBSERVABILITY`)."""
    found = []
    for name in OBSERVABILITY:
        path = SRC.joinpath(*name.split("."))
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    return found


@pytest.mark.slow
def test_dvc_status_reruns_exactly_the_stages_that_read_an_edit(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    record_code_deps(repo)  # the lock in the working tree may lag behind the code (the test above)
    assert code_status(repo) == {}
    model_config = readers("src/lmforge/model/config.py")
    assert "pretrain@decoder" in model_config and "prepare" not in model_config  # neither none nor all
    objectives = readers("src/lmforge/training/objectives.py")
    assert "pretrain@decoder" in objectives and not {"prepare", "finetune_summary", "findings"} & objectives
    composes_config = readers("conf/config.yaml")
    assert "prepare" in composes_config and "translate_train" not in composes_config  # conf/translate.yaml's
    observing = [rel(p) for p in observing_files()]
    assert observing and not any(readers(p) for p in observing)
    edits = [
        ("src/lmforge/model/config.py", model_config),
        ("src/lmforge/training/objectives.py", objectives),
        ("conf/config.yaml", composes_config),
        *((p, set()) for p in observing),
    ]
    for edited, expected in edits:
        path = repo / edited
        original = path.read_bytes()
        path.write_bytes(original + b"\n# an edit\n")
        changed = code_status(repo)
        path.write_bytes(original)
        assert set(changed) == expected, f"{edited}: reran {sorted(changed)}, expected {sorted(expected)}"
        wrong = {s: p for s, p in changed.items() if not all(covers(repo / d, path) for d in p)}
        assert not wrong, f"{edited}: other deps changed too: {wrong}"


@pytest.mark.slow
def test_a_training_change_lands_with_the_default_fresh_and_the_experiments_marked(tmp_path):
    """Issue 77's landing in steps, in a scratch copy: edit training code, rerun the default pipeline
    (its stages relocked here, as a comment changes no output), `make status WRITE=1`; then the
    default pipeline owes nothing, every experiment that reads the file is owed and marked with its
    commit in stale.json, findings.md and the docs, and `make status` prints the hours it costs."""
    from lmforge.freshness import marks
    from lmforge.freshness.status import compute

    repo = copy_repository(tmp_path / "repo")
    edited = "src/lmforge/training/objectives.py"
    (repo / edited).write_text((repo / edited).read_text() + "\n# an edit\n")
    default = {s for s in readers(edited) if not s.startswith(EXPERIMENTS)}
    experiments = {s for s in readers(edited) if s.startswith(EXPERIMENTS)}
    assert default and experiments
    record_code_deps(repo, only=default)  # as `make repro` would, after rerunning them
    out = subprocess.run(
        [sys.executable, "-m", "lmforge.freshness", "status", "--write"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "A catch-up costs" in out.stdout and " h on this machine" in out.stdout
    status = compute(repo)
    assert not [o.id for o in status.owed if not o.id.startswith(EXPERIMENTS)]
    assert code_status(repo).keys() <= {s for s in stages(current_experiment()) if s.startswith(EXPERIMENTS)}
    assert marks.out_of_date(repo, status) == []
    stale = json.loads((repo / marks.STALE_FILE).read_text())["stages"]
    for sid in experiments:
        entry = stale[sid.split(":", 1)[1]]
        changed = [
            c.removesuffix(" (params)") for c in entry["changed"]
        ]  # a file, or a folder dep holding it
        assert any(covers(repo / c, repo / edited) for c in changed) or entry["measured_at"] is None, sid
        assert entry["mark"].startswith("stale: "), sid
        assert sid in out.stdout
    findings = json.loads((repo / "reports/findings.json").read_text())["claims"]
    report = (repo / "reports/findings.md").read_text()
    marked = {stage for claim in findings.values() for stage in claim["stale"]}
    assert marked and marked <= set(stale)
    assert all(f"**Stale** (`{stage}`): {stale[stage]['mark']}." in report for stage in marked)
    assert marks.BEGIN in (repo / "docs/fine-tuning.md").read_text()


@pytest.mark.slow
def test_python_bytecode_caches_rerun_nothing(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    record_code_deps(repo)
    for package in (repo / "src").rglob("__init__.py"):  # as importing src/ writes them
        (package.parent / "__pycache__").mkdir(exist_ok=True)
        (package.parent / "__pycache__" / "probe.cpython-311.pyc").write_bytes(b"\0")
    changed = code_status(repo)
    assert not changed, f"__pycache__ changes directory deps, add __pycache__/ to .dvcignore: {changed}"


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


@pytest.mark.slow
def test_a_new_task_and_its_row_enter_the_pipeline_through_the_generator(tmp_path):
    """A new labelled task is one task yaml plus its row yamls: the generator adds its `task@` stage,
    and the fine-tuning stages' deps take the new files in, with no edit to a template."""
    repo = copy_repository(tmp_path / "repo")
    (repo / "conf/task/tiny.yaml").write_text(TINY_TASK)
    (repo / "conf/row/encoder-tiny.yaml").write_text(TINY_ROW)
    subprocess.run([sys.executable, "-m", "scripts.dvc_yaml"], cwd=repo, check=True, timeout=900)
    generated = yaml.safe_load((repo / "dvc.yaml").read_text())
    tasks = next(v["tasks"] for v in generated["vars"] if isinstance(v, dict) and "tasks" in v)
    assert "tiny" in tasks
    out = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "--json", "finetune", "--with-deps"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    status = json.loads(out.stdout)
    assert "task@tiny" in status and "finetune" in status  # a fresh copy has no outputs: all must run
    finetune = generated["stages"]["finetune"]["deps"]
    assert "conf/row" in finetune and "conf/task" in finetune  # swept folders hold the new files


if __name__ == "__main__":
    for exp in experiments():
        for stage_name in stages(exp):
            print(f"{stage_name} (experiment={exp}):", *sorted(rel(p) for p in required(exp, stage_name)))
            stage = stages(exp)[stage_name]
            print(
                "   ", "; ".join(check(stage.deps, required(exp, stage_name), swept(stage.commands))) or "ok"
            )
