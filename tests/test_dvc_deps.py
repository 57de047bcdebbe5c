"""dvc.yaml's deps are checked against what each stage reads, for every stage instance DVC sees under
every experiment overlay (`dvc exp run -S experiment=<name>`).

A stage reads (1) its entry point `pipelines/<x>.py` and every file under src/ that it imports,
transitively: a static walk of all `import` statements, those inside functions included, with each
parent package's `__init__.py`; (2) every config file Hydra composes for the command's overrides
that lands in a group the stage may read (`STAGE.reads`, widened by interpolations such as
`${run_name}`), nested defaults included, plus the global files: conf/config.yaml, the experiment
overlay and global-package options such as conf/row/*.yaml (for every job of a `--multirun`); (3)
its data, listed by hand in dvc.yaml and not checked here. A dep covers a file it equals or contains.
The test names the stage and each missing path; it also fails on code or config deps that do not
exist or that cover nothing the stage reads, and on folder deps most of whose files the stage does
not read (a folder stands for a package the stage mostly imports, not for "everything under src/").

The slow tests run `dvc status` in a scratch copy of the working tree: dvc.lock records the current
code and config; with the lock brought up to date, appending a comment to src/lmforge/model/config.py,
then to conf/config.yaml, marks exactly the stages that read it, and a Python bytecode cache marks
none.

`python tests/test_dvc_deps.py` prints what each stage reads.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
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
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.types import RunMode
from omegaconf import OmegaConf
from repo_copy import copy_repository

from helpers import sweep_jobs

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CONF = ROOT / "conf"
CODE = ("src", "conf", "pipelines")  # top folders of code and config deps; every other dep is data
# `${a}`, `${a.b}`: a read of top-level key `a`; resolver calls such as `${oc.env:X}` hold a colon
INTERPOLATION = re.compile(r"\$\{([A-Za-z_]\w*)[^:{}]*\}")


class DvcStage(NamedTuple):
    commands: list[list[str]]  # each command of the stage, split
    deps: list[str]  # dep paths, relative to the repository root
    params: list[str]  # the files of its `params:` section


# The root pipeline and the experiments `dvc repro` leaves out (run as `dvc repro <file>`).
PIPELINE_FILES = ("dvc.yaml", "pipelines/experiments/dvc.yaml")


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def covers(dep: Path, path: Path) -> bool:
    return path == dep or path.is_relative_to(dep)


def is_code(dep: str) -> bool:
    """A code or config dep; pipelines/experiments/dvc.lock (which the findings stage reads as the
    record of that pipeline's results) is data."""
    return Path(dep).parts[0] in CODE and Path(dep).name != "dvc.lock"


def current_experiment() -> str:
    return yaml.safe_load((ROOT / "params.yaml").read_text())["experiment"]


@cache
def experiments() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))


@cache
def stages(experiment: str) -> dict[str, DvcStage]:
    """The stage instances DVC sees (foreach expanded) when params.yaml selects `experiment`, as
    after `dvc exp run -S experiment=<name>`. DVC reads a copy of dvc.yaml and its vars files, so
    nothing is written to the repository."""
    with tempfile.TemporaryDirectory() as tmp:
        for pipeline in PIPELINE_FILES:
            (Path(tmp) / pipeline).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / pipeline, Path(tmp) / pipeline)
        for entry in yaml.safe_load((ROOT / "dvc.yaml").read_text()).get("vars", []):
            if isinstance(entry, str):  # a vars file, `path.yaml` or `path.yaml:key`
                path = entry.partition(":")[0]
                (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / path, Path(tmp) / path)
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


# -- (1) the import closure --------------------------------------------------------------------


def imported_names(source: str, package: str) -> set[str]:
    """Absolute names of all that `source` imports anywhere (the names of `from m import a` as `m` and
    `m.a`, since `a` may be a submodule); `package` resolves relative imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def module_file(name: str) -> Path | None:
    """The file under src/ that defines module `name`, if any (third-party modules have none)."""
    path = SRC.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@cache
def import_closure(entry: Path) -> frozenset[Path]:
    """Every file under src/ that `entry` imports, transitively, with each parent package's __init__."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        module = ".".join(path.relative_to(SRC).with_suffix("").parts) if path.is_relative_to(SRC) else ""
        package = (
            module.removesuffix(".__init__") if path.name == "__init__.py" else module.rpartition(".")[0]
        )
        for name in imported_names(path.read_text(encoding="utf-8"), package):
            parts = name.split(".")  # lmforge.a.b: lmforge/__init__.py, lmforge/a/__init__.py, lmforge/a/b.py
            found = (module_file(".".join(parts[:i])) for i in range(1, len(parts) + 1))
            todo.extend(f for f in found if f is not None)
    return frozenset(p for p in seen if p.is_relative_to(SRC))


# -- (2) the composed config files -------------------------------------------------------------


@cache
def config_name(entry: Path) -> str:
    """The primary config an entry point composes (`cli(STAGE, __file__, "<name>")`): config, translate, ..."""
    found = re.search(r'cli\(STAGE, __file__, "(\w+)"\)', entry.read_text(encoding="utf-8"))
    assert found, f'{rel(entry)}: no cli(STAGE, __file__, "<primary config>")'

    return found.group(1)


@cache
def stage_reads(entry: Path) -> frozenset[str]:
    """`STAGE.reads` of an entry point: the config groups and top-level keys its stage may read."""
    spec = importlib.util.spec_from_file_location(f"_dvc_deps_{entry.stem}", entry)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.STAGE.reads)


def composed_files(overrides: list[str], reads: frozenset[str], primary: str = "config") -> set[Path]:
    """conf/ files Hydra composes for `overrides` into the global package (conf/<primary>.yaml, the
    experiment overlay) or into a top-level key the stage reads, nested defaults included
    (trainer/cpu_long -> trainer/cpu, model/gpt_tiny -> model/base). A key read through an
    interpolation (`out_dir: artifacts/pretrain/${run_name}`) counts as read."""
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONF)))
    cfg = OmegaConf.to_container(loader.load_configuration(primary, overrides, RunMode.RUN), resolve=False)
    keys, todo = set(reads), list(reads)
    while todo:
        for key in INTERPOLATION.findall(json.dumps(cfg[todo.pop()])):
            if key not in keys:
                keys.add(key)
                todo.append(key)
    defaults = loader.compute_defaults_list(primary, overrides, RunMode.RUN).defaults
    return {
        CONF / f"{d.config_path}.yaml"
        for d in defaults
        if (d.package == "" or d.package.split(".")[0] in keys) and (CONF / f"{d.config_path}.yaml").is_file()
    }


@cache
def required(experiment: str, name: str) -> frozenset[Path]:
    """The code and config files stage `name` reads: its entry point, its import closure under src/
    and the config files composed for each job of its command."""
    found: set[Path] = set()
    for words in stages(experiment)[name].commands:
        at = next(
            i for i, w in enumerate(words) if w.endswith(".py")
        )  # python pipelines/<x>.py key=value ...
        script = ROOT / words[at]
        reads, primary = stage_reads(script), config_name(script)
        configs = {
            path for job in sweep_jobs(words[at + 1 :]) for path in composed_files(job, reads, primary)
        }
        found |= {script} | import_closure(script) | configs
    return frozenset(found)


# -- the tests ---------------------------------------------------------------------------------


def source_files(folder: Path) -> list[Path]:
    """The code and config files under a folder dep, as DVC hashes them (no bytecode caches)."""
    return [p for p in folder.rglob("*") if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts]


def swept(commands: list[list[str]]) -> set[str]:
    """The config-group folders whose listing decides which jobs a stage runs: each group its command
    sweeps with `glob(...)` (a new option joins the sweep), and each group those options override (a
    new row brings its task)."""
    folders = set()
    for words in commands:
        for group in (m.group(1) for w in words if (m := re.fullmatch(r"([\w/]+)=glob\(.*\)", w))):
            folders.add(f"conf/{group}")
            for option in (CONF / group).glob("*.yaml"):
                folders |= {f"conf/{g}" for g in re.findall(r"override /(\w+):", option.read_text())}
    return folders


def check(deps: list[str], need: frozenset[Path], whole: set[str] = frozenset()) -> list[str]:
    """What is wrong with a stage's `deps` given the files `need` it reads. A folder dep stands for
    its files only where the stage reads at least half of them: coarser, an edit the stage never sees
    would rerun it (`src/lmforge` would cover every stage's code and so prove nothing). The folders
    in `whole` are exempt: the stage sweeps their listing, so any file there may join its jobs."""
    missing = sorted(rel(p) for p in need if not any(covers(ROOT / d, p) for d in deps))
    absent = sorted(d for d in deps if is_code(d) and not (ROOT / d).exists())
    unread = sorted(d for d in deps if is_code(d) and not any(covers(ROOT / d, p) for p in need))
    folders = [d for d in deps if is_code(d) and (ROOT / d).is_dir() and d not in unread and d not in whole]
    coarse = []
    for d in folders:
        files = source_files(ROOT / d)
        read = sum(p in need for p in files)
        if 2 * read < len(files):
            coarse.append(f"{d} ({read} of {len(files)} files)")
    found = {
        "lacks deps": missing,
        "lists deps that do not exist": absent,
        "lists deps it never reads": unread,
        "lists folders most of whose files it never reads, list those it reads instead": sorted(coarse),
    }
    return [f"{what} {paths}" for what, paths in found.items() if paths]


def problems(experiment: str, name: str) -> list[str]:
    stage = stages(experiment)[name]
    return check(stage.deps, required(experiment, name), swept(stage.commands))


@pytest.mark.parametrize(
    "experiment, name", [(e, n) for e in experiments() for n in stages(e)], ids=lambda v: v
)
def test_stage_depends_on_everything_it_reads(experiment, name):
    found = problems(experiment, name)
    assert not found, f"dvc.yaml: stage {name} (experiment={experiment}) " + "; ".join(found)


GROUP_FILE = re.compile(
    r"^conf/(?!paths/|experiment/|hydra/)[a-z_]+/[^/]+\.yaml$"
)  # a group's preset or base


@pytest.mark.parametrize("name", list(stages("default")), ids=lambda v: v)
def test_params_list_the_config_group_files_the_stage_reads(name):
    """`dvc exp show` and `dvc params diff` show a stage's knobs: the group files among its deps (not
    the primary config, the paths or the experiment overlay), each once."""
    stage = stages("default")[name]
    assert stage.params == list(dict.fromkeys(d for d in stage.deps if GROUP_FILE.match(d))), name


def test_the_check_rejects_missing_unread_and_too_coarse_deps():
    experiment = current_experiment()
    deps, need = stages(experiment)["pretrain@decoder"].deps, required(experiment, "pretrain@decoder")
    assert check(deps, need) == []
    without_model = [d for d in deps if d != "src/lmforge/model"]
    assert "src/lmforge/model/stack.py" in check(without_model, need)[0]  # lacks deps [...]
    assert check([*deps, "src/lmforge/evaluation"], need) == [
        "lists deps it never reads ['src/lmforge/evaluation']"
    ]
    assert check([*deps, "conf/eval/default.yaml"], need) == [
        "lists deps it never reads ['conf/eval/default.yaml']"
    ]
    coarse = check([*deps, "src/lmforge"], need)  # covers everything the stage reads, and far more
    assert len(coarse) == 1 and coarse[0].startswith("lists folders most of whose files it never reads")


def test_the_helpers_find_what_they_must():
    source = "import os\nfrom . import masks\ndef f():\n    from lmforge.model.config import ModelConfig\n"
    assert imported_names(source, "lmforge.model") == {
        "os",
        "lmforge.model",
        "lmforge.model.masks",
        "lmforge.model.config",
        "lmforge.model.config.ModelConfig",
    }
    closure = {rel(p) for p in import_closure(ROOT / "pipelines/pretrain.py")}
    assert {
        "src/lmforge/__init__.py",
        "src/lmforge/model/config.py",
        "src/lmforge/model/components/mlp.py",
    } <= closure
    assert "src/lmforge/evaluation/evaluate.py" not in closure  # evaluation code is not pretraining's
    experiment = current_experiment()
    pretrain = {rel(p) for p in required(experiment, "pretrain@encoder")}
    assert {"conf/config.yaml", f"conf/experiment/{experiment}.yaml", "conf/model/base.yaml"} <= pretrain
    assert {
        "conf/model/bert_tiny_rope.yaml",
        "conf/trainer/cpu.yaml",
        "conf/trainer/cpu_encoder.yaml",
    } <= pretrain
    assert not {"conf/eval/default.yaml", "conf/logger/mlflow.yaml", "conf/data/brown.yaml"} & pretrain
    assert "conf/data/brown.yaml" in {rel(p) for p in required(experiment, "prepare")}
    assert set(stages(experiment)) >= {"prepare", "tokenizer@bpe", "encode@bpe", "evaluate@encoder_decoder"}


def code_status(repo: Path) -> dict[str, set[str]]:
    """Stage -> the code and config deps (or 'command') that `dvc status` in `repo` reports changed.
    Outputs and data deps are left out: a scratch copy has none of them."""
    command = [sys.executable, "-m", "dvc", "status", "--json"]
    out = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    changed: dict[str, set[str]] = {}
    for stage, entries in json.loads(out.stdout or "{}").items():
        for entry in entries:  # {"changed deps": {path: state}}, {"changed outs": ...} or "changed command"
            deps = entry.get("changed deps", {}) if isinstance(entry, dict) else {}
            paths = ["command"] if entry == "changed command" else [p for p in deps if is_code(p)]
            changed.setdefault(stage, set()).update(paths)
    return {stage: paths for stage, paths in changed.items() if paths}


def record_code_deps(repo: Path) -> None:
    """Write the current hashes of every code and config dep into `repo`'s dvc.lock, as `dvc repro`
    would after running each stage; data deps and outputs keep their recorded hashes."""
    dvc = Repo(str(repo))
    try:
        with dvc.lock:
            for stage in dvc.index.stages:
                for dep in stage.deps:
                    if is_code(dep.def_path):
                        dep.save()
                stage.dump(update_pipeline=False)
    finally:
        dvc.close()


EXPERIMENTS = "pipelines/experiments/dvc.yaml"


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["dvc.yaml", EXPERIMENTS])
def test_dvc_lock_records_the_current_code_and_config(tmp_path, pipeline):
    stale = {
        stage: paths
        for stage, paths in code_status(copy_repository(tmp_path / "repo")).items()
        if stage.startswith(EXPERIMENTS) == (pipeline == EXPERIMENTS)
    }
    if stale:
        lines = [
            f"dvc.lock is stale for {stage}: {', '.join(sorted(paths))}" for stage, paths in stale.items()
        ]
        pytest.fail("; run dvc repro and commit dvc.lock\n".join([*lines, ""]), pytrace=False)


@pytest.mark.slow
def test_dvc_status_reruns_exactly_the_stages_that_read_an_edit(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    record_code_deps(repo)  # the lock in the working tree may lag behind the code (the test above)
    assert code_status(repo) == {}
    experiment = current_experiment()
    config_py = {n for n in stages(experiment) if SRC / "lmforge/model/config.py" in required(experiment, n)}
    assert "pretrain@decoder" in config_py and "prepare" not in config_py  # neither none nor all
    composes_config = {n for n in stages(experiment) if CONF / "config.yaml" in required(experiment, n)}
    assert "prepare" in composes_config and "translate_train" not in composes_config  # conf/translate.yaml's
    for edited, expected in (
        ("src/lmforge/model/config.py", config_py),
        ("conf/config.yaml", composes_config),
    ):
        path = repo / edited
        original = path.read_bytes()
        path.write_bytes(original + b"\n# an edit\n")
        changed = code_status(repo)
        path.write_bytes(original)
        assert set(changed) == expected, f"{edited}: reran {sorted(changed)}, expected {sorted(expected)}"
        wrong = {s: p for s, p in changed.items() if not all(covers(repo / d, path) for d in p)}
        assert not wrong, f"{edited}: other deps changed too: {wrong}"


@pytest.mark.slow
def test_python_bytecode_caches_rerun_nothing(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    record_code_deps(repo)
    for package in (repo / "src").rglob("__init__.py"):  # as importing src/ writes them
        (package.parent / "__pycache__").mkdir(exist_ok=True)
        (package.parent / "__pycache__" / "probe.cpython-311.pyc").write_bytes(b"\0")
    changed = code_status(repo)
    assert not changed, f"__pycache__ changes directory deps, add __pycache__/ to .dvcignore: {changed}"


if __name__ == "__main__":
    for exp in experiments():
        for stage_name in stages(exp):
            print(f"{stage_name} (experiment={exp}):", *sorted(rel(p) for p in required(exp, stage_name)))
            print("   ", "; ".join(problems(exp, stage_name)) or "dvc.yaml covers it")
