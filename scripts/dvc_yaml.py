"""Writes dvc.yaml and pipelines/experiments/dvc.yaml from their hand-kept templates,
pipelines/stages.yaml and pipelines/experiments/stages.yaml, adding each stage's code and config
deps and its `params:`. A template holds what only a person can say: commands, outputs, metrics,
plots, `foreach`/`matrix`, and the data a stage reads (`deps:` in a template lists data only). Every
stage runs at the repository root: the generator gives the stages of pipelines/experiments/ their
`wdir`. The top-level `plots:` (each task's scores along fine-tuning) are generated too.

What a stage reads is computed, never typed:
- its entry points (`python pipelines/<x>.py ...` in its commands, each registered in
  `pipelines.STAGES`) and every file under src/ they import, transitively (a static walk of every
  `import` statement, those inside functions included, with each parent package's `__init__.py`),
  except the modules that only observe a run (`OBSERVABILITY`): they cannot change an output, so an
  edit to them reruns no stage (tests/test_dvc_deps.py proves the claim on the smoke pipeline);
- every config file Hydra composes for each job of each command (a `--multirun` sweep expanded as
  Hydra's basic sweeper does) that lands in the global package or in a top-level key the stage
  declares in `STAGE.reads`, widened by interpolations (`${run_name}`), nested defaults included;
- for a command that sweeps a group with `glob(...)`, the group's folder (a new option joins the
  sweep) and the folders of the groups its options override (a new row brings its task).
A package folder stands for its files where the stage reads every file under it; otherwise the
files are listed, so an edit reruns exactly the stages that import the file. A `foreach`/`matrix`
stage gets one deps list for all its instances: a config file named by an instance's value becomes
`conf/<group>/${item.<group>}.yaml` (or `${key}`, `${item}`), and the list must expand to exactly
what each instance reads under every experiment overlay, else the generator stops and says where.
`params:` lists the group files among the deps, so `dvc params diff` shows each stage's knobs.

Every output, metric and plot under reports/ is committed to git, not to DVC's cache: the generator
writes its `cache: false`, and a template that says it refuses to load.

`make repro` runs it first; tests/test_dvc_deps.py fails while a committed dvc.yaml differs from
what it writes.

    python -m scripts.dvc_yaml           # rewrite both dvc.yaml files
    python -m scripts.dvc_yaml --check   # exit 1, naming the files, when either is stale
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import itertools
import json
import re
import shlex
import sys
import tempfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import CachingConfigRepository
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra._internal.defaults_list import create_defaults_list
from hydra._internal.utils import create_config_search_path
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from lmforge.codebase import OBSERVABILITY, import_closure, imported_names, module_file, observes  # noqa: F401
from lmforge.io import write_text

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CONF = ROOT / "conf"
# generated file -> its hand-kept template
PIPELINES = {
    "dvc.yaml": "pipelines/stages.yaml",
    "pipelines/experiments/dvc.yaml": "pipelines/experiments/stages.yaml",
}
# generated file -> the repository root, relative to it (its stages' `wdir`: every stage runs there)
ROOT_FROM = {target: Path(*[".."] * (len(Path(target).parts) - 1)).as_posix() for target in PIPELINES}
CODE = ("src", "conf", "pipelines")  # top folders of code and config; every other dep is data
# `${a}`, `${a.b}`: a read of top-level key `a`; resolver calls such as `${oc.env:X}` hold a colon
INTERPOLATION = re.compile(r"\$\{([A-Za-z_]\w*)[^:{}]*\}")
GROUP_FILE = re.compile(r"^conf/(?!paths/|experiment/|hydra/)[a-z_]+/[^/]+\.yaml$")  # a group's preset
HEADER = (
    "# Written by `python -m scripts.dvc_yaml` from {template}: edit that file, not this one.\n"
    "# Each stage's code and config deps and its params are computed from what it reads (the script's\n"
    "# docstring says how); the template's `deps` (its data) follow them.\n"
)


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# The experiments' records under pipelines/ that `findings` reads are data, not code: dvc.lock (what
# that pipeline's results are) and stale.json (which of them lag the code, `make status`).
RECORDS = ("dvc.lock", "stale.json")


def is_code(dep: str) -> bool:
    """A code or config dep; the RECORDS are data."""
    return Path(dep).parts[0] in CODE and Path(dep).name not in RECORDS


# -- the composed config files ---------------------------------------------------------------------


@cache
def _loader() -> ConfigLoaderImpl:
    return ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONF)))


def sweep_jobs(overrides: list[str], conf: Path = CONF) -> list[list[str]]:
    """The overrides of each job a command runs: one job, or under `--multirun` every job of Hydra's
    basic sweeper (`row=a,b`, `row=glob(*)` over the group's options under `conf`)."""
    if "--multirun" not in overrides and "-m" not in overrides:
        return [overrides]
    loader = _loader() if conf == CONF else ConfigLoaderImpl(create_config_search_path(str(conf)))
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(
        [o for o in overrides if o not in ("--multirun", "-m")]
    )
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def composed_files(overrides: list[str], reads: frozenset[str], primary: str = "config") -> frozenset[Path]:
    """conf/ files Hydra composes for `overrides` into the global package (conf/<primary>.yaml, the
    experiment overlay) or into a top-level key the stage reads, nested defaults included
    (trainer/cpu_long -> trainer/cpu, model/gpt_tiny -> model/base). A key read through an
    interpolation (`out_dir: artifacts/pretrain/${run_name}`) counts as read."""
    return _composed(tuple(overrides), reads, primary)


@cache
def _composed(overrides: tuple[str, ...], reads: frozenset[str], primary: str) -> frozenset[Path]:
    defaults, config_overrides = _defaults(primary, overrides)
    cfg = _merged(defaults, config_overrides)
    keys, todo = set(reads), list(reads)
    while todo:
        for key in INTERPOLATION.findall(json.dumps(cfg.get(todo.pop()))):
            if key not in keys:
                keys.add(key)
                todo.append(key)
    return frozenset(
        CONF / f"{d.config_path}.yaml"
        for d in defaults
        if (d.package == "" or d.package.split(".")[0] in keys) and (CONF / f"{d.config_path}.yaml").is_file()
    )


@cache
def _repository() -> CachingConfigRepository:
    """One cache of parsed config files for every composition (Hydra's own lasts one composition)."""
    return CachingConfigRepository(_loader().repository)


def _defaults(primary: str, overrides: tuple[str, ...]) -> tuple[list[Any], list[Any]]:
    """Hydra's defaults list for `overrides` (each composed file with its package, in merge order)
    and the overrides that set values. An experiment overlay without a defaults list of its own
    adds only itself to the list, so every such overlay shares one computed list."""
    chosen = next((o.partition("=")[2] for o in overrides if o.startswith("experiment=")), None)
    if chosen is None or not _plain_overlay(chosen) or not _plain_overlay("default"):
        return _defaults_list(primary, overrides)
    canonical = tuple("experiment=default" if o.startswith("experiment=") else o for o in overrides)
    defaults, config_overrides = _defaults_list(primary, canonical)
    swap = {"experiment/default": f"experiment/{chosen}"}
    defaults = [dataclasses.replace(d, config_path=swap.get(d.config_path, d.config_path)) for d in defaults]
    return defaults, config_overrides


@cache
def _plain_overlay(name: str) -> bool:
    path = CONF / "experiment" / f"{name}.yaml"
    return path.is_file() and "defaults" not in (yaml.safe_load(path.read_text()) or {})


@cache
def _defaults_list(primary: str, overrides: tuple[str, ...]) -> tuple[list[Any], list[Any]]:
    parsed = OverridesParser.create().parse_overrides(overrides=list(overrides))
    found = create_defaults_list(
        repo=_repository(), config_name=primary, overrides_list=parsed, prepend_hydra=True, skip_missing=False
    )
    return found.defaults, found.config_overrides


@cache
def _content(config_path: str) -> dict[str, Any]:
    """One config file's values, interpolations unresolved, without its defaults list."""
    loaded = _repository().load_config(config_path=config_path)
    values = OmegaConf.to_container(loaded.config, resolve=False)
    values.pop("defaults", None)
    return values


def _merged(defaults: list[Any], config_overrides: list[Any]) -> dict[str, Any]:
    """The composed config as plain values, interpolations unresolved: each file's values under its
    package, merged in order, then the command line's values (what Hydra composes, without its
    `hydra` node and its runtime bookkeeping)."""
    cfg: dict[str, Any] = {}
    for d in defaults:
        if d.config_path is None or d.package == "hydra" or d.package.startswith("hydra."):
            continue
        node = _content(d.config_path)
        for part in reversed([p for p in d.package.split(".") if p]):
            node = {part: node}
        _deep_merge(cfg, node)
    for override in config_overrides:
        *parents, leaf = override.key_or_group.split(".")
        target = cfg
        for part in parents:
            target = target.setdefault(part, {})
        if override.is_delete():
            target.pop(leaf, None)
        else:
            target[leaf] = override.value()
    return cfg


def _deep_merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = json.loads(json.dumps(value)) if isinstance(value, dict | list) else value


def entry_stage(entry: Path) -> Any:
    """The `STAGE` of entry point `pipelines/<name>.py`, through the registry of `pipelines`."""
    import pipelines

    if entry.parent != ROOT / "pipelines" or entry.stem not in pipelines.STAGES:
        raise SystemExit(f"error: {rel(entry)}: not an entry point of pipelines.STAGES")
    return pipelines.stage(entry.stem)


@cache
def stage_reads(entry: Path) -> frozenset[str]:
    """`STAGE.reads` of an entry point: the config groups and top-level keys its stage may read."""
    return frozenset(entry_stage(entry).reads)


@cache
def config_name(entry: Path) -> str:
    """The primary config an entry point composes (`cli(STAGE, __file__, "<name>")`): config, translate, ..."""
    import pipelines

    return pipelines.STAGES[entry.stem]


def command_reads(words: list[str]) -> set[Path]:
    """The code and config files one command reads: `python pipelines/<x>.py key=value ...`."""
    at = next(i for i, w in enumerate(words) if w.endswith(".py"))
    script = ROOT / words[at]
    reads, primary = stage_reads(script), config_name(script)
    configs = {path for job in sweep_jobs(words[at + 1 :]) for path in composed_files(job, reads, primary)}
    return {script} | import_closure(script) | configs


def swept(commands: list[list[str]]) -> set[str]:
    """The config-group folders whose listing decides which jobs a stage runs: each group its command
    sweeps with `glob(...)`, and each group those options override."""
    folders = set()
    for words in commands:
        for group in (m.group(1) for w in words if (m := re.fullmatch(r"([\w/]+)=glob\(.*\)", w))):
            folders.add(f"conf/{group}")
            for option in (CONF / group).glob("*.yaml"):
                folders |= {f"conf/{g}" for g in re.findall(r"override /(\w+):", option.read_text())}
    return folders


# -- folding files into folders, and instances into one template ----------------------------------


def source_files(folder: Path) -> list[Path]:
    """The code and config files under a folder, as DVC hashes them (no bytecode caches)."""
    return sorted(
        p for p in folder.rglob("*") if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts
    )


def fold(files: Iterable[Path], top: Path = SRC, root: Path = ROOT) -> list[str]:
    """`files` under `top` as deps (paths relative to `root`): a folder where every source file under
    it is read, else its files."""
    files = set(files)
    out: list[str] = []

    def walk(folder: Path) -> None:
        inside = source_files(folder)
        if inside and all(p in files for p in inside) and folder != top:
            out.append(folder.relative_to(root).as_posix())
            return
        for child in sorted(folder.iterdir()):
            if child.is_dir() and child.name != "__pycache__":
                if any(p.is_relative_to(child) for p in files):
                    walk(child)
            elif child in files:
                out.append(child.relative_to(root).as_posix())

    walk(top)
    return out


class Instance(NamedTuple):
    name: str  # as DVC names it: pretrain@encoder
    values: dict[str, str]  # template variable -> value: key, item, item.model, ...
    commands: list[list[str]]  # each command, split


def template_path(path: str, values: dict[str, str]) -> str:
    """`conf/<group>/<stem>.yaml` with the instance value that names it put back as its variable:
    `${item.<group>}` first, then a variable named as the group (`${experiment}`), `${key}`, `${item}`,
    any other `${item.<field>}`; a value that is the whole stem before one that is a `-`-separated
    part of it (`encoder-${item}`); else unchanged."""
    parts = Path(path).parts
    if len(parts) < 3 or parts[0] != "conf" or not path.endswith(".yaml"):
        return path
    group, stem = "/".join(parts[1:-1]), Path(parts[-1]).stem
    order = [f"item.{group}", group, "key", "item", *sorted(v for v in values if v.startswith("item."))]
    for var in order:
        if values.get(var) == stem:
            return f"conf/{group}/${{{var}}}.yaml"
    for var in order:
        value = values.get(var)
        if value and value in stem.split("-"):
            words = ["${" + var + "}" if w == value else w for w in stem.split("-")]
            return f"conf/{group}/{'-'.join(words)}.yaml"
    return path


def expand(path: str, values: dict[str, str]) -> str:
    for var, value in values.items():
        path = path.replace(f"${{{var}}}", value)
    return path


# -- the pipelines ---------------------------------------------------------------------------------


class Template(NamedTuple):
    target: str  # dvc.yaml, relative to the root
    data: CommentedMap  # the template, round-trip loaded (comments kept)


def _yaml() -> YAML:
    y = YAML()
    y.width = 4096  # the template's lines as written: nothing is re-wrapped
    y.indent(mapping=2, sequence=4, offset=2)
    y.preserve_quotes = True
    return y


def load_templates() -> list[Template]:
    return [
        Template(target, _yaml().load((ROOT / source).read_text())) for target, source in PIPELINES.items()
    ]


@cache
def row_tasks() -> tuple[str, ...]:
    """Every labelled task some fine-tuning row trains on (conf/row/**, conf/distill_row/*), as Hydra
    composes the row: each becomes a `task@<name>` stage."""
    tasks = set()
    for group in ("row", "distill_row"):
        for row in sorted((CONF / group).rglob("*.yaml")):
            option = row.relative_to(CONF / group).with_suffix("").as_posix()  # extra/<row>
            cfg = _merged(*_defaults("config", (f"{group}={option}",)))
            tasks.add(str(cfg["task"]["name"]))
    return tuple(sorted(tasks))


def computed_vars() -> dict[str, Any]:
    """The `vars` the generator computes: `tasks` (every task a row trains on)."""
    return {"tasks": list(row_tasks())}


def plain(node: Any) -> Any:
    return json.loads(json.dumps(node))


def experiments() -> list[str]:
    return sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def _instances(templates: list[Template], experiment: str) -> dict[tuple[str, str], list[Instance]]:
    """(pipeline, template stage) -> its instances as DVC expands them under `experiment`. DVC reads
    a scratch copy of the templates (data deps only) and their vars files."""
    with tempfile.TemporaryDirectory() as tmp:
        for t in templates:
            skeleton = plain(t.data)
            if t.target == "dvc.yaml":
                skeleton["vars"] = [*skeleton.get("vars", []), computed_vars()]
            (Path(tmp) / t.target).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / t.target).write_text(yaml.safe_dump(skeleton, sort_keys=False))
            for entry in skeleton.get("vars", []):
                if isinstance(entry, str):
                    source = (Path(t.target).parent / entry.partition(":")[0]).as_posix()
                    (Path(tmp) / source).parent.mkdir(parents=True, exist_ok=True)
                    (Path(tmp) / source).write_text((ROOT / source).read_text())
        params = yaml.safe_load((ROOT / "params.yaml").read_text())
        (Path(tmp) / "params.yaml").write_text(yaml.safe_dump({**params, "experiment": experiment}))
        from dvc.repo import Repo

        repo = Repo(tmp, uninitialized=True, config={"core": {"no_scm": True}})
        variables = {t.target: _vars(t) for t in templates}
        try:
            found: dict[tuple[str, str], list[Instance]] = {}
            for s in repo.index.stages:
                pipeline = Path(s.dvcfile.path).resolve().relative_to(Path(tmp).resolve()).as_posix()
                template = next(t for t in templates if t.target == pipeline)
                base, _, key = s.name.partition("@")
                values = {"experiment": experiment, **_variables(template, base, key, variables[pipeline])}
                commands = s.cmd if isinstance(s.cmd, list) else [s.cmd]
                found.setdefault((pipeline, base), []).append(
                    Instance(s.name, values, [shlex.split(c) for c in commands])
                )
            return found
        finally:
            repo.close()


def _variables(template: Template, stage: str, key: str, variables: dict[str, Any]) -> dict[str, str]:
    """The template variables of instance `key` of `stage`: `key` and `item` or `item.<field>`."""
    definition = template.data["stages"][stage]
    if not key:
        return {}
    if "matrix" in definition:
        axes = list(definition["matrix"])
        for combo in itertools.product(*(definition["matrix"][a] for a in axes)):
            if "-".join(map(str, combo)) == key:
                return {f"item.{a}": str(v) for a, v in zip(axes, combo)}
        raise SystemExit(f"error: {template.target}: {stage}@{key}: no matrix combination")
    foreach = definition["foreach"]
    if isinstance(foreach, str):  # ${name}: a vars entry
        name = foreach.strip("${} ")
        foreach = variables[name]
    if isinstance(foreach, list):
        return {"item": key}
    item = foreach[key]
    if isinstance(item, dict):
        return {"key": key, **{f"item.{f}": str(v) for f, v in item.items()}}
    return {"key": key, "item": str(item)}


def _vars(template: Template) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for entry in plain(template.data.get("vars", [])):
        if isinstance(entry, str):
            found.update(yaml.safe_load((ROOT / Path(template.target).parent / entry).read_text()) or {})
        else:
            found.update(entry)
    if template.target == "dvc.yaml":
        found.update(computed_vars())
    return found


def stage_deps(instances_by_experiment: dict[str, list[Instance]], stage: str) -> list[str]:
    """The code and config deps of one template stage, one list for all its instances and overlays."""
    code: set[Path] = set()
    templated: set[str] = set()
    wanted: list[tuple[dict[str, str], set[str]]] = []
    folders: set[str] = set()
    for instances in instances_by_experiment.values():
        for inst in instances:
            read = set().union(*(command_reads(words) for words in inst.commands))
            folders |= swept(inst.commands)
            configs = {rel(p) for p in read if p.is_relative_to(CONF)}
            configs = {c for c in configs if not any(Path(c).is_relative_to(f) for f in folders)}
            code |= {p for p in read if not p.is_relative_to(CONF)}
            templated |= {template_path(c, inst.values) for c in configs}
            wanted.append((inst.values, configs))
    for values, configs in wanted:
        got = {expand(t, values) for t in templated}
        if got != configs:
            raise SystemExit(
                f"error: stage {stage}: one deps list cannot say what each instance reads "
                f"({values}): it would add {sorted(got - configs)} and miss {sorted(configs - got)}; "
                "give the instances' differences a variable of their own"
            )
    entries = sorted(rel(p) for p in code if p.is_relative_to(ROOT / "pipelines"))
    return [*entries, *sorted(folders), *sorted(templated), *fold(p for p in code if p.is_relative_to(SRC))]


CURVE_ENTRY = "finetune"  # the entry point whose rows write validation curves (finetune.curve)
PANELS_NOTE = (
    "Each task's validation scores along fine-tuning: a panel per (curves folder, task, metric), every\n"
    "row of the pipeline that writes its curve there, a line per seed (.dvc/plots/seeds.json; the loss\n"
    "is each stage's own plot). Generated from the rows' configs: a new row or task joins its panels."
)


def curve_panels(
    instances: dict[tuple[str, str], list[Instance]], template: Template
) -> list[dict[str, Any]]:
    """The top-level `plots:` of one pipeline: for each fine-tuning job of its stages that plot
    curves (in order), its curve file's `val/<metric>` columns, grouped into panels
    `<folder>: <task>, <metric>`, where <folder> names the reports folder above `curves/`."""
    panels: dict[str, dict[str, str]] = {}
    for (pipeline, name), found in instances.items():
        definition = template.data["stages"].get(name, {}) if pipeline == template.target else {}
        plots = plain(definition.get("do", definition).get("plots", []))
        if not any("/curves" in (p if isinstance(p, str) else next(iter(p))) for p in plots):
            continue
        for inst in found:
            for words in inst.commands:
                at = next(i for i, w in enumerate(words) if w.endswith(".py"))
                if Path(words[at]).stem != CURVE_ENTRY:
                    continue
                for job in sweep_jobs(words[at + 1 :]):
                    cfg = OmegaConf.create(_merged(*_defaults(config_name(ROOT / words[at]), tuple(job))))
                    curve = Path(str(OmegaConf.select(cfg, "finetune.curve")))
                    folder = curve.relative_to(ROOT).parent if curve.is_absolute() else curve.parent
                    group = "/".join(folder.parts[1:-1])  # reports/<group>/curves
                    for metric in OmegaConf.select(cfg, "task.metrics"):
                        title = f"{group}: {OmegaConf.select(cfg, 'task.name')}, {metric}"
                        panels.setdefault(title, {})[curve.as_posix()] = f"val/{metric}"
    return [{title: {"template": "seeds", "x": "step", "y": y}} for title, y in panels.items()]


def render(templates: list[Template] | None = None) -> dict[str, str]:
    """Each generated dvc.yaml's text, by its path."""
    templates = templates or load_templates()
    by_experiment = {e: _instances(templates, e) for e in experiments()}
    out = {}
    for t in templates:
        data = t.data
        if panels := curve_panels(by_experiment["default"], t):
            if "plots" in data:
                raise SystemExit(f"error: {PIPELINES[t.target]}: the top-level plots are generated")
            data["plots"] = CommentedSeq(panels)
            data.yaml_set_comment_before_after_key("plots", before=PANELS_NOTE)
        if t.target == "dvc.yaml":
            computed = CommentedMap({k: _flow(CommentedSeq(v)) for k, v in computed_vars().items()})
            data.setdefault("vars", CommentedSeq()).append(computed)
        for name, definition in data["stages"].items():
            found = {e: by_experiment[e].get((t.target, name), []) for e in by_experiment}
            deps = stage_deps(found, f"{t.target}:{name}")
            body = definition["do"] if "foreach" in definition else definition
            if "wdir" in body:
                raise SystemExit(f"error: {PIPELINES[t.target]}: {name}: wdir is generated")
            if (wdir := ROOT_FROM[t.target]) != ".":  # every stage runs at the repository root
                body.insert(list(body).index("cmd"), "wdir", wdir)
            uncached_reports(body, f"{PIPELINES[t.target]}: {name}")
            data_deps = list(body.get("deps", []))
            if bad := [d for d in data_deps if is_code(d)]:
                raise SystemExit(f"error: {PIPELINES[t.target]}: {name}: deps {bad} are code or config")
            params = [d for d in deps if GROUP_FILE.match(d.replace("${", "").replace("}", ""))]
            _place(body, "deps", CommentedSeq([*deps, *data_deps]))
            if params:
                _place(body, "params", CommentedSeq(CommentedMap({p: None}) for p in params), after="deps")
            elif "params" in body:
                del body["params"]
        buffer = io.StringIO()
        _yaml().dump(data, buffer)
        out[t.target] = HEADER.format(template=PIPELINES[t.target]) + buffer.getvalue()
    return out


REPORTS = "reports/"  # outputs committed to git: never in DVC's cache


def uncached_reports(body: CommentedMap, where: str) -> None:
    """Give each output, metric and plot under reports/ its `cache: false` (last among its options)."""
    for kind in ("outs", "metrics", "plots"):
        for i, entry in enumerate(body.get(kind) or []):
            path, options = (entry, None) if isinstance(entry, str) else next(iter(entry.items()))
            if not str(path).startswith(REPORTS):
                continue
            if options is not None and "cache" in options:
                raise SystemExit(
                    f"error: {where}: {kind} {path}: cache is generated (reports/ is never cached)"
                )
            options = options if options is not None else _flow(CommentedMap())
            options["cache"] = False
            entry = CommentedMap({path: options})
            if comment := body[kind].ca.items.pop(i, None):  # a comment after the entry stays after it
                entry.ca.items[path] = [None, None, comment[0], None]
            body[kind][i] = entry


def _flow(node: Any) -> Any:
    node.fa.set_flow_style()
    return node


def _place(body: CommentedMap, key: str, value: Any, after: str = "cmd") -> None:
    """Set `body[key]`, right after `after` (and `wdir`), so each stage reads cmd, deps, params, outs."""
    if key in body:
        del body[key]
    keys = list(body)
    anchor = max(keys.index(k) for k in (after, "wdir") if k in keys)
    body.insert(anchor + 1, key, value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a committed dvc.yaml is stale")
    args = parser.parse_args(argv)
    stale = []
    for target, text in render().items():
        if (ROOT / target).read_text() != text:
            stale.append(target)
            if not args.check:
                write_text(ROOT / target, text)  # atomic: DVC never reads half a file
    if args.check and stale:
        print(f"stale: {', '.join(stale)}; run `python -m scripts.dvc_yaml`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
