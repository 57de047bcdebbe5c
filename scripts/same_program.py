"""Whether two versions of a stage's code are one program: the proof `scripts.relock` uses when code
moved between modules (a module split by concern, a definition given a new home, an import made
lazy), where its file-by-file proof cannot follow.

A program here is what the stage's entry points reach by name. Every name a definition reads is
resolved, in its own version, to what it denotes: a definition (function, class or module-level
assignment) of a module under src/ or pipelines/, a module, or a name outside the repository
(`torch.nn.Linear`). Two versions are one program when, from the entry points' definitions and
their modules' import-time statements on, every definition has the same form in both (its syntax
tree without docstrings, each name it reads replaced by what it denotes, and the name it defines
left out: a function's, a class's, or the one name of a module-level assignment), and what the names denote
is, pairwise, the same program again (pairs already assumed equal are not revisited, so recursion
terminates). Where a definition lives, what it is called, whether its import is at the top of a
module or inside a function, and a function's annotations in a module that never evaluates them
(`from __future__ import annotations`) do not matter; what it does does.

Refused, so that a move never hides a change of behaviour:
- a class that moved to another module, unless it moved into an observing module (a class's module
  is part of what pickles and checkpoints record);
- a definition that reads `__file__` from another folder (a path next to the file would point
  elsewhere);
- a module imported in only one version that runs statements at import (other than definitions,
  imports and assignments), or decorates with the repository's own code (a registry filled at
  import would differ);
- a module imported in both whose import-time statements differ, and a module-level assignment
  that calls something at import while nothing reads it, unless it is the same in both;
- `from m import *`, and any name that resolves to nothing.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

PLACEHOLDER = "§"  # a name no Python source can hold: a resolved reference in a dumped tree


class Target(NamedTuple):
    """What a name denotes: ("def", module, name), ("module", module, ""), ("ext", dotted, attr),
    or ("missing", module, name)."""

    kind: str
    module: str
    name: str


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    defs: dict[str, ast.stmt] = field(default_factory=dict)  # name -> its defining statement
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (module, attr or "")
    effects: list[ast.stmt] = field(default_factory=list)  # statements run at import, in order

    @property
    def lazy_annotations(self) -> bool:
        """`from __future__ import annotations`: annotations stay text (a dataclass reads its fields'
        names and kinds from them, so those are compared; nothing here reads a function's)."""
        return any(
            isinstance(s, ast.ImportFrom)
            and s.module == "__future__"
            and any(a.name == "annotations" for a in s.names)
            for s in self.tree.body
        )

    @property
    def package(self) -> str:
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def without_docstrings(tree: ast.AST) -> ast.AST:
    """`tree` with the docstring of its module, classes and functions dropped (in place)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def import_bindings(node: ast.Import | ast.ImportFrom, package: str) -> dict[str, tuple[str, str]]:
    """The names an import statement binds -> (module, attribute or "" for the module itself)."""
    out: dict[str, tuple[str, str]] = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                out[alias.asname] = (alias.name, "")
            else:  # `import a.b` binds `a`
                out[alias.name.split(".")[0]] = (alias.name.split(".")[0], "")
        return out
    base = (
        importlib.util.resolve_name("." * node.level + (node.module or ""), package)
        if node.level
        else node.module
    )
    for alias in node.names:
        if alias.name == "*":
            raise ProofError(f"from {base} import *: the names it binds cannot be followed")
        out[alias.asname or alias.name] = (base or "", alias.name)
    return out


class ProofError(Exception):
    pass


class Version:
    """One version of the repository's code: its modules under src/ and pipelines/, parsed lazily."""

    def __init__(self, root: Path, observing: tuple[str, ...]) -> None:
        self.root, self.observing = root, observing
        self._modules: dict[str, Module | None] = {}
        self._closures: dict[str, frozenset[str]] = {}

    def observes(self, module: str) -> bool:
        return any(module == o or module.startswith(f"{o}.") for o in self.observing)

    def file(self, name: str) -> Path | None:
        parts = name.split(".")
        top = self.root if parts[0] == "pipelines" else self.root / "src"
        path = top.joinpath(*parts)
        for candidate in (path / "__init__.py", path.with_suffix(".py")):
            if candidate.is_file():
                return candidate
        return None

    def module(self, name: str) -> Module | None:
        if name not in self._modules:
            path = self.file(name)
            self._modules[name] = None if path is None else self._parse(name, path)
        return self._modules[name]

    def entry(self, path: Path) -> Module:
        """An entry point (`pipelines/<x>.py`) as module `pipelines.<x>`."""
        name = ".".join(path.relative_to(self.root).with_suffix("").parts)
        found = self.module(name)
        if found is None:
            raise ProofError(f"{path}: no such entry point")
        return found

    def _parse(self, name: str, path: Path) -> Module:
        tree = without_docstrings(ast.parse(path.read_text(encoding="utf-8")))
        module = Module(name, path, tree)
        for stmt in tree.body:
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                if not (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
                    module.imports.update(import_bindings(stmt, module.package))
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                module.defs[stmt.name] = stmt
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                if not names or not all(isinstance(t, ast.Name | ast.Tuple) for t in targets):
                    module.effects.append(stmt)
                for bound in names:
                    module.defs[bound] = stmt
            elif _type_checking(stmt):
                for inner in stmt.body:
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        module.imports.update(import_bindings(inner, module.package))
            else:
                module.effects.append(stmt)
                for inner in ast.walk(stmt):  # `try: import x` / `if ...: def f` bind names too
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        module.imports.update(import_bindings(inner, module.package))
        return module

    def resolve(self, module: str, name: str, seen: frozenset = frozenset()) -> Target:
        """What `name` denotes in `module` ("" for the module itself)."""
        if (module, name) in seen:
            return Target("missing", module, name)
        found = self.module(module)
        if found is None:
            return Target("ext", module, name)
        if not name:
            return Target("module", module, "")
        if name in found.defs:
            return Target("def", module, name)
        if name in found.imports:
            target_module, attr = found.imports[name]
            return self.resolve(target_module, attr, seen | {(module, name)})
        if self.module(f"{module}.{name}") is not None:
            return Target("module", f"{module}.{name}", "")
        return Target("missing", module, name)

    def attribute(self, target: Target, attr: str) -> Target | None:
        """`target.attr` where target is a module of ours; None when it is not."""
        return self.resolve(target.module, attr) if target.kind == "module" else None

    def closure(self, start: str) -> frozenset[str]:
        """Every module of ours that importing `start` (and calling what it defines) imports."""
        if start in self._closures:
            return self._closures[start]
        seen: set[str] = set()
        todo = [start]
        while todo:
            name = todo.pop()
            if name in seen or (module := self.module(name)) is None:
                continue
            seen.add(name)
            parts = name.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages run first
            for node in ast.walk(module.tree):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                        continue
                    for target_module, attr in import_bindings(node, module.package).values():
                        todo.append(target_module)
                        if attr:
                            todo.append(f"{target_module}.{attr}")
                    if isinstance(node, ast.Import):
                        todo += [alias.name for alias in node.names]
        self._closures[start] = frozenset(seen)
        return self._closures[start]


def _type_checking(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.If)
        and isinstance(stmt.test, ast.Name | ast.Attribute)
        and (
            getattr(stmt.test, "id", None) == "TYPE_CHECKING"
            or getattr(stmt.test, "attr", None) == "TYPE_CHECKING"
        )
    )


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp)  # fmt: skip


def scope_bindings(scope: ast.AST, package: str) -> dict[str, tuple[str, str] | None]:
    """The names a scope binds itself -> (module, attr) for a name it imports, None for a local:
    parameters, assignment, loop, `with` and `except` targets, nested definitions' names, imports;
    not what nested scopes bind."""
    bound: dict[str, tuple[str, str] | None] = {}
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        bound.update((a.arg, None) for a in ast.walk(scope.args) if isinstance(a, ast.arg))
        todo = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    elif isinstance(scope, ast.ClassDef):
        todo = list(scope.body)
    else:  # a comprehension: its targets, its conditions and element
        todo = [g for g in scope.generators]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound[node.name] = None
            todo += [*node.decorator_list, *getattr(node, "bases", [])]
            continue
        if isinstance(node, SCOPES):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound.update(import_bindings(node, package))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound[node.id] = None
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound[node.name] = None
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound[node.name] = None
        todo += list(ast.iter_child_nodes(node))
    return bound


class Form(NamedTuple):
    dump: str  # the definition's tree, docstrings dropped, each resolved name a numbered placeholder
    refs: list[Target]  # what each placeholder denotes, in order
    reads_file: bool  # whether it reads `__file__`


def form(version: Version, module: Module, node: ast.stmt) -> Form:
    """A statement's form: each name it reads from its module, or imports inside itself, replaced by
    what it denotes; its nested import statements dropped (they only bind those names). Local names
    stay names: a scope at a time, as Python resolves them (a class body is not seen by its methods)."""
    refs: list[Target] = []
    reads_file = False
    stack: list[tuple[ast.AST, dict[str, tuple[str, str] | None]]] = []

    def placeholder(target: Target) -> ast.Name:
        refs.append(target)
        return ast.Name(id=f"{PLACEHOLDER}{len(refs) - 1}", ctx=ast.Load())

    def lookup(name: str) -> tuple[bool, tuple[str, str] | None]:
        for depth, (scope, bound) in enumerate(reversed(stack)):
            if isinstance(scope, ast.ClassDef) and depth > 0:
                continue
            if name in bound:
                return True, bound[name]
        return False, None

    class Resolve(ast.NodeTransformer):
        def generic_visit(self, inner):
            if isinstance(inner, SCOPES):
                stack.append((inner, scope_bindings(inner, module.package)))
                try:
                    return super().generic_visit(inner)
                finally:
                    stack.pop()
            return super().generic_visit(inner)

        def visit_Import(self, inner):  # noqa: N802 - ast's visitor names
            return None

        visit_ImportFrom = visit_Import  # noqa: N815

        def visit_Name(self, inner):  # noqa: N802
            nonlocal reads_file
            if inner.id == "__file__":
                reads_file = True
            if not isinstance(inner.ctx, ast.Load):
                return inner
            found, imported = lookup(inner.id)
            if found:
                return placeholder(version.resolve(*imported)) if imported else inner
            if inner.id in module.defs or inner.id in module.imports:
                return placeholder(version.resolve(module.name, inner.id))
            return inner  # a builtin

        def visit_Attribute(self, inner):  # noqa: N802
            inner.value = self.visit(inner.value)
            value = inner.value
            if isinstance(value, ast.Name) and value.id == f"{PLACEHOLDER}{len(refs) - 1}":
                deeper = version.attribute(refs[-1], inner.attr)
                if deeper is not None:
                    refs[-1] = deeper  # `pkg.mod.f`: the placeholder now stands for `f`
                    return value
            return inner

    tree = copy.deepcopy(node)  # a copy: the module keeps its own tree
    if isinstance(tree, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        tree.name = ""  # what it is called is not what it does
    elif isinstance(tree, ast.Assign) and len(tree.targets) == 1 and isinstance(tree.targets[0], ast.Name):
        tree.targets[0].id = ""  # one name bound to one value: the same, as for a function's name
    elif isinstance(tree, ast.AnnAssign) and isinstance(tree.target, ast.Name):
        tree.target.id = ""
    if module.lazy_annotations:  # never evaluated: a function's annotations are text nothing reads
        for inner in ast.walk(tree):
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                inner.returns = None
                for arg in ast.walk(inner.args):
                    if isinstance(arg, ast.arg):
                        arg.annotation = None
    tree = Resolve().visit(tree)
    return Form(ast.dump(tree) if tree is not None else "", refs, reads_file)


class Proof:
    """The pairwise comparison of one base version with one current version."""

    def __init__(self, base: Version, now: Version) -> None:
        self.base, self.now = base, now
        self.assumed: set[tuple[Target, Target]] = set()
        self.reached: tuple[set[tuple[str, str]], set[tuple[str, str]]] = (set(), set())  # base, now

    def same_target(self, a: Target, b: Target, where: str) -> None:
        if (a, b) in self.assumed:
            return
        self.assumed.add((a, b))
        if a.kind != b.kind or a.kind in ("ext", "missing") and a != b:
            raise ProofError(f"{where}: {_say(a)} became {_say(b)}")
        if a.kind in ("ext", "missing"):
            return
        if a.kind == "module":
            self.same_module(a.module, b.module, where)
            return
        old_module, new_module = self.base.module(a.module), self.now.module(b.module)
        old, new = old_module.defs[a.name], new_module.defs[b.name]
        self.reached[0].add((a.module, a.name))
        self.reached[1].add((b.module, b.name))
        observed = self.now.observes(b.module)
        if isinstance(new, ast.ClassDef) and a.module != b.module and not observed:
            raise ProofError(f"class {b.name} moved from {a.module} to {b.module}")
        before, after = form(self.base, old_module, old), form(self.now, new_module, new)
        if before.dump != after.dump or len(before.refs) != len(after.refs):
            raise ProofError(f"{b.module}.{b.name} differs from {a.module}.{a.name}")
        folders = (
            old_module.path.parent.relative_to(self.base.root),
            new_module.path.parent.relative_to(self.now.root),
        )
        if after.reads_file and folders[0] != folders[1]:
            raise ProofError(f"{b.module}.{b.name} reads __file__ from another folder than {a.module}")
        for x, y in zip(before.refs, after.refs):
            self.same_target(x, y, f"{b.module}.{b.name}")

    def same_module(self, old: str, new: str, where: str) -> None:
        """A module used as a value (`import m` then `m` passed on) is itself: the same name."""
        if old != new:
            raise ProofError(f"{where}: module {old} became {new}")

    def effects(self, version: Version, module: Module) -> list[Form]:
        return [form(version, module, stmt) for stmt in module.effects]

    def same_effects(self, base_modules: frozenset[str], now_modules: frozenset[str]) -> None:
        """What importing the modules runs: the same statements for a module imported in both; for
        one imported in only one version, none but definitions that decorate with nothing of ours."""
        for name in sorted(base_modules & now_modules):
            old, new = self.base.module(name), self.now.module(name)
            before, after = self.effects(self.base, old), self.effects(self.now, new)
            if [f.dump for f in before] != [f.dump for f in after]:
                raise ProofError(f"{name}: what it runs at import changed")
            for x, y in zip((r for f in before for r in f.refs), (r for f in after for r in f.refs)):
                self.same_target(x, y, f"{name} at import")
        for version, names in (
            (self.base, base_modules - now_modules),
            (self.now, now_modules - base_modules),
        ):
            for name in sorted(names):
                module = version.module(name)
                if module.effects:
                    raise ProofError(f"{name}, imported in one version only, runs statements at import")
                for stmt in module.defs.values():
                    for decorator in getattr(stmt, "decorator_list", []):
                        if any(t.kind == "def" for t in form(version, module, ast.Expr(decorator)).refs):
                            raise ProofError(f"{name}, imported in one version only, decorates with our code")

    def unread_calls(self, side: int, names: frozenset[str]) -> dict[tuple[str, str], Form]:
        """(module, name) -> form of each module-level assignment that calls something at import
        and that nothing the entry points reach reads (`X = open(...)`, never referenced)."""
        version = (self.base, self.now)[side]
        out = {}
        for name in sorted(names):
            module = version.module(name)
            for bound, stmt in module.defs.items():
                if not isinstance(stmt, ast.Assign | ast.AnnAssign) or (name, bound) in self.reached[side]:
                    continue
                if stmt.value is not None and any(isinstance(n, ast.Call) for n in ast.walk(stmt.value)):
                    out[(name, bound)] = form(version, module, stmt)
        return out

    def same_unread_calls(self, base_modules: frozenset[str], now_modules: frozenset[str]) -> None:
        """What runs at import though nothing reads it: the same in a module of both versions, and
        nothing in a module of one."""
        before, after = self.unread_calls(0, base_modules), self.unread_calls(1, now_modules)
        shared = base_modules & now_modules
        for side, found in (("base", before), ("current", after)):
            for module, bound in found:
                if module not in shared:
                    raise ProofError(f"{module}.{bound}, in the {side} version only, calls at import")
        if {k for k in before if k[0] in shared} != {k for k in after if k[0] in shared}:
            changed = sorted({k for k in before if k[0] in shared} ^ {k for k in after if k[0] in shared})
            raise ProofError(f"{'.'.join(changed[0])}: calls at import in one version only")
        for key, old in before.items():
            new = after[key]
            if old.dump != new.dump or len(old.refs) != len(new.refs):
                raise ProofError(f"{'.'.join(key)}: what it calls at import changed")
            for x, y in zip(old.refs, new.refs):
                self.same_target(x, y, ".".join(key))

    def same_entry(self, old: Module, new: Module) -> None:
        """An entry point: the same definitions by name, and the same statements at import."""
        if set(old.defs) != set(new.defs):
            raise ProofError(f"{new.path.name}: defines {sorted(new.defs)}, was {sorted(old.defs)}")
        for name in sorted(old.defs):
            self.same_target(Target("def", old.name, name), Target("def", new.name, name), new.path.name)


def same_program(
    base_root: Path, now_root: Path, entries: list[str], observing: tuple[str, ...]
) -> str | None:
    """None when the entry points (paths relative to the roots) make one program in both versions;
    else why not, in one line."""
    base, now = Version(base_root, observing), Version(now_root, observing)
    proof = Proof(base, now)
    try:
        base_modules: frozenset[str] = frozenset()
        now_modules: frozenset[str] = frozenset()
        for entry in entries:
            old, new = base.entry(base_root / entry), now.entry(now_root / entry)
            proof.same_entry(old, new)
            base_modules |= base.closure(old.name)
            now_modules |= now.closure(new.name)
        proof.same_effects(base_modules, now_modules)
        proof.same_unread_calls(base_modules, now_modules)
    except ProofError as err:
        return str(err)
    except (KeyError, SyntaxError, RecursionError) as err:
        return f"cannot compare: {type(err).__name__}: {err}"
    return None


def _say(target: Target) -> str:
    if target.kind == "def":
        return f"{target.module}.{target.name}"
    if target.kind == "module":
        return f"module {target.module}"
    return f"{target.kind} {target.module}{'.' + target.name if target.name else ''}"
