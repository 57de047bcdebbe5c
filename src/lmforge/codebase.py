"""What code a run imports: the static import closure of a module, under the package's `src` folder.

One walk serves two readers that must agree: `scripts/dvc_yaml.py` makes each stage's code deps
from it, and a training run's fingerprint (`lmforge.training.pretrain.fingerprint`) hashes the files
it names, so an edit to code a run never imports neither reruns its stage nor refuses its resume.

The walk follows every `import` statement (those inside functions included) and adds each parent
package's `__init__.py`. The modules that only observe a run (`OBSERVABILITY`: MLflow runs and their
hierarchy, logged models and their serving code, the registry, the sweep's cell runs) are neither
included nor followed: they cannot change an output.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

import lmforge

SRC = Path(lmforge.__file__).resolve().parents[1]
OBSERVABILITY = ("lmforge.tracking", "lmforge.logged_model", "lmforge.serving")


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


def observes(name: str) -> bool:
    return any(name == o or name.startswith(f"{o}.") for o in OBSERVABILITY)


def module_file(name: str, src: Path = SRC) -> Path | None:
    """The file under `src` that defines module `name`, if any (third-party modules have none)."""
    path = src.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@cache
def import_closure(entry: Path, src: Path = SRC) -> frozenset[Path]:
    """Every file under `src` that `entry` imports, transitively, with each parent package's
    `__init__.py` (and `entry` itself when it lies under `src`); an observing module is neither
    included nor followed."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        module = ".".join(path.relative_to(src).with_suffix("").parts) if path.is_relative_to(src) else ""
        package = (
            module.removesuffix(".__init__") if path.name == "__init__.py" else module.rpartition(".")[0]
        )
        for name in imported_names(path.read_text(encoding="utf-8"), package):
            parts = name.split(".")  # lmforge.a.b: lmforge/__init__.py, lmforge/a/__init__.py, lmforge/a/b.py
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if observes(prefix):
                    break
                if (found := module_file(prefix, src)) is not None:
                    todo.append(found)
    return frozenset(p for p in seen if p.is_relative_to(src))


def module_code(name: str) -> list[Path]:
    """The files module `name` runs with: itself, its parent packages and all it imports, sorted."""
    entry = module_file(name)
    if entry is None:
        raise ValueError(f"module {name!r}: no file under {SRC}")
    parents = [module_file(".".join(name.split(".")[:i])) for i in range(1, name.count(".") + 1)]
    return sorted(import_closure(entry) | {p for p in parents if p is not None})
