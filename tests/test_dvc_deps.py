"""The DVC graph is complete by construction: every stage depends on each file under src/ that its
entry point imports (transitively, imports inside functions included), on every config file Hydra
composes for the groups the stage may read (`STAGE.reads`; `execute` hides the others from it), on
conf/config.yaml and on the experiment overlay. A missing path fails naming the stage and the path.
A slow test edits ModelConfig's module and conf/config.yaml in a scratch copy and checks that
`dvc status` reports exactly the stages that must rerun."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from dvc.repo import Repo
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.types import RunMode

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CONF = ROOT / "conf"


@cache
def stages() -> dict[str, tuple[list[str], list[str]]]:
    """DVC's stage instances (foreach expanded): name -> (command words, dependency paths)."""
    repo = Repo(str(ROOT))
    try:
        return {s.addressing: (shlex.split(s.cmd), [d.def_path for d in s.deps]) for s in repo.index.stages}
    finally:
        repo.close()


def _module_file(name: str) -> Path | None:
    path = SRC.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _imported(tree: ast.AST, package: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import: resolve against the importing module's package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule or an attribute
    return {n for n in names if n == "lmforge" or n.startswith("lmforge.")}


def import_closure(entry: Path) -> set[Path]:
    """Every file under src/ that `entry` imports, transitively, with each parent package's __init__."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if path.is_relative_to(SRC):
            module = ".".join(path.relative_to(SRC).with_suffix("").parts)
            package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rpartition(".")[0]
        else:
            package = ""
        for name in _imported(ast.parse(path.read_text(encoding="utf-8")), package):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                found = _module_file(".".join(parts[:i]))
                if found is not None:
                    todo.append(found)
    return {p for p in seen if p.is_relative_to(SRC)}


def stage_reads(entry: Path) -> set[str]:
    spec = importlib.util.spec_from_file_location(f"entry_{entry.stem}", entry)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.STAGE.reads)


def composed_files(overrides: list[str], reads: set[str]) -> set[Path]:
    """conf/ files Hydra composes for these overrides: the primary config, the experiment overlay and
    every file of a group the stage reads, nested defaults included (trainer/cpu_long -> trainer/cpu)."""
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONF)))
    defaults = loader.compute_defaults_list(config_name="config", overrides=overrides, run_mode=RunMode.RUN)
    files = set()
    for default in defaults.defaults:
        group = default.config_path.split("/")[0]
        path = CONF / f"{default.config_path}.yaml"
        if path.is_file() and (default.config_path == "config" or group == "experiment" or group in reads):
            files.add(path)
    return files


def required(name: str) -> set[Path]:
    words, _ = stages()[name]
    script = ROOT / words[1]
    overrides = [w for w in words[2:] if "=" in w]
    return {script} | import_closure(script) | composed_files(overrides, stage_reads(script))


def missing(name: str) -> list[str]:
    _, deps = stages()[name]
    covered = [ROOT / d for d in deps]
    return sorted(
        str(p.relative_to(ROOT)) for p in required(name) if not any(p == d or p.is_relative_to(d) for d in covered)
    )


@pytest.mark.parametrize("name", sorted(stages()))
def test_stage_depends_on_everything_it_reads(name):
    assert missing(name) == [], f"dvc.yaml: stage {name} lacks deps {missing(name)}"


def test_the_helpers_find_what_they_must():
    closure = {str(p.relative_to(ROOT)) for p in import_closure(ROOT / "pipelines/pretrain.py")}
    assert {"src/lmforge/config.py", "src/lmforge/__init__.py", "src/lmforge/objectives/rng.py"} <= closure
    assert "src/lmforge/evaluation/evaluate.py" not in closure  # precision: evaluation is not pretraining
    files = {str(p.relative_to(ROOT)) for p in required("pretrain@encoder")}
    assert {"conf/config.yaml", "conf/trainer/cpu.yaml", "conf/trainer/cpu_long.yaml", "conf/model/base.yaml"} <= files
    assert "conf/experiment/default.yaml" in files and "conf/eval/default.yaml" not in files
    assert "src/lmforge/config.py" not in {str(p.relative_to(ROOT)) for p in required("prepare")}


def _status(repo: Path) -> dict[str, set[str]]:
    """Stage -> its code/config deps that `dvc status` reports changed (data deps are absent here)."""
    out = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "--json"], cwd=repo, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    changed: dict[str, set[str]] = {}
    for stage, entries in json.loads(out.stdout or "{}").items():
        for entry in entries:
            if isinstance(entry, dict):
                for path, state in entry.get("changed deps", {}).items():
                    if state == "modified" and path.split("/")[0] in ("src", "conf", "pipelines"):
                        changed.setdefault(stage, set()).add(path)
    return changed


@pytest.mark.slow
def test_dvc_status_reruns_exactly_the_stages_that_read_an_edit(tmp_path):
    repo = tmp_path / "repo"
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in [*files, ".dvc/config"]:
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    stale = _status(repo)
    assert not stale, f"dvc.lock is stale for {stale}: run dvc repro and commit dvc.lock"

    for edited, expected in (
        ("src/lmforge/config.py", {n for n in stages() if SRC / "lmforge/config.py" in required(n)}),
        ("conf/config.yaml", set(stages())),
    ):
        path = repo / edited
        original = path.read_text()
        path.write_text(original + "\n# an edit\n")
        changed = _status(repo)
        assert set(changed) == expected and all(edited in paths for paths in changed.values()), changed
        path.write_text(original)
    assert {"pretrain@decoder", "evaluate@decoder"} <= expected_config_py_stages()


def expected_config_py_stages() -> set[str]:
    return {n for n in stages() if SRC / "lmforge/config.py" in required(n)}


if __name__ == "__main__":  # print what each stage is missing
    os.chdir(ROOT)
    for stage_name in sorted(stages()):
        print(stage_name, missing(stage_name))
