"""Floors go down: no two packages of src/lmforge import each other, directly or through others.

The import graph is read statically (every `import` / `from ... import` in a module, those inside
functions included) and folded onto units: a top-level subpackage (`lmforge/data/`) or a top-level
module (`lmforge/door.py`). Its strongly connected components must all be single units.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "lmforge"

Edges = dict[tuple[str, str], list[str]]  # (importer unit, imported unit) -> ["file:line", ...]


def _unit(module: str) -> str | None:
    """`lmforge.data.mix` -> "data"; `lmforge.tracking` -> "tracking"; `lmforge` itself -> None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "lmforge" and len(parts) > 1 else None


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: resolve against the importing module's package
        anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join(anchor + ([base] if base else []))
    if base == "lmforge":  # `from lmforge import tracking` names a unit
        return [f"lmforge.{alias.name}" for alias in node.names]
    return [base]


def import_edges(package: Path = PACKAGE) -> Edges:
    edges: Edges = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        source = _unit(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in _imported(node, module, is_package):
                target = _unit(name)
                if source and target and target != source:
                    edges[source, target].append(f"{path.relative_to(package.parents[1])}:{node.lineno}")
    return dict(edges)


def cycles(edges: Edges) -> list[list[str]]:
    """Strongly connected components of more than one unit (Tarjan), each sorted, in sorted order."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph[b]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def describe(component: list[str], edges: Edges) -> str:
    """One line per edge inside the cycle: `a -> b  (file:line, ...)`."""
    inside = sorted((a, b) for a, b in edges if a in component and b in component)
    return "\n".join(f"  {a} -> {b}  ({', '.join(edges[a, b])})" for a, b in inside)


def test_the_cycle_finder_finds_direct_and_indirect_cycles_and_nothing_else():
    edges = {
        ("data", "tasks"): ["data/mix.py:3"],
        ("tasks", "data"): ["tasks/brown.py:9"],
        ("a", "b"): ["a.py:1"],
        ("b", "c"): ["b.py:1"],
        ("c", "a"): ["c.py:1"],
        ("c", "errors"): ["c.py:2"],
        ("training", "data"): ["training/fit.py:5"],
    }
    assert cycles(edges) == [["a", "b", "c"], ["data", "tasks"]]
    assert describe(["data", "tasks"], edges) == (
        "  data -> tasks  (data/mix.py:3)\n  tasks -> data  (tasks/brown.py:9)"
    )
    assert cycles({k: v for k, v in edges.items() if k != ("c", "a")}) == [["data", "tasks"]]


def test_the_graph_sees_imports_inside_functions_and_relative_ones(tmp_path):
    pkg = tmp_path / "src" / "lmforge"
    (pkg / "data").mkdir(parents=True)
    (pkg / "data" / "__init__.py").write_text("from .mix import load\n")
    (pkg / "data" / "mix.py").write_text("def load():\n    from lmforge.tasks import fetch\n")
    (pkg / "tracking.py").write_text("from lmforge import data\n")
    assert import_edges(pkg) == {
        ("data", "tasks"): ["src/lmforge/data/mix.py:2"],
        ("tracking", "data"): ["src/lmforge/tracking.py:1"],
    }


def test_packages_import_only_downward():
    edges = import_edges()
    found = cycles(edges)
    assert not found, (
        "packages that import each other (each must import only packages below it):\n"
        + "\n".join(f"cycle {' <-> '.join(c)}:\n{describe(c, edges)}" for c in found)
    )
