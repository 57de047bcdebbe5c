"""The two pipelines as one graph of stages, their committed locks, and each stage's run record.

A stage's id is DVC's address: `name` for the root dvc.yaml, `<dvc.yaml path>:name` for another
pipeline (`pipelines/experiments/dvc.yaml:finetune_ner`). A run record (`runs.json` beside a
pipeline's lock; the root pipeline's in pipelines/) holds, per stage: `commit`, the commit whose code
its lock entry certifies; `seconds`, the last run's duration (`at_least` when it was stopped before
the end); `inputs`, for each dependency that lies inside another stage's output folder, that folder's
md5 when it ran (the lock records the file's md5 only, which another stage's lock cannot confirm).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT_PIPELINE = "dvc.yaml"
CODE = ("src", "conf", "pipelines")  # a dep under these is code or config


@dataclass(frozen=True)
class StageDef:
    id: str
    pipeline: str  # the dvc.yaml it lives in, relative to the root
    deps: tuple[str, ...]
    outs: tuple[str, ...]


@dataclass
class Lineage:
    """Every stage of every pipeline under `root`, in definition order, with its lock entry and record."""

    root: Path
    stages: dict[str, StageDef]
    locks: dict[str, dict]  # id -> lock entry (absent: never run)
    runs: dict[str, dict] = field(default_factory=dict)  # id -> run record

    def producers(self, path: str) -> list[tuple[str, str]]:
        """(stage id, output path) of each output that is `path`, holds it, or lies inside it."""
        found = []
        for sid, stage in self.stages.items():
            for out in stage.outs:
                o, p = out.rstrip("/"), path.rstrip("/")
                if p == o or p.startswith(o + "/") or o.startswith(p + "/"):
                    found.append((sid, out))
        return found

    def consumers(self) -> dict[str, set[str]]:
        """id -> the ids of the stages it reads an output of."""
        found: dict[str, set[str]] = {}
        for sid, stage in self.stages.items():
            found[sid] = {p for d in stage.deps for p, _ in self.producers(d) if p != sid}
        return found

    def order(self) -> list[str]:
        """Producers before their consumers; otherwise the definition order, root pipeline first."""
        upstream = self.consumers()
        done: list[str] = []
        placed: set[str] = set()

        def place(sid: str, path: tuple[str, ...] = ()) -> None:
            if sid in placed or sid in path:
                return
            for up in sorted(upstream[sid], key=list(self.stages).index):
                place(up, (*path, sid))
            placed.add(sid)
            done.append(sid)

        for sid in self.stages:
            place(sid)
        return done

    def inputs_of(self, sid: str, locks: dict[str, dict] | None = None) -> dict[str, dict[str, str]]:
        """{dep: {output: md5}} for the deps of `sid` that are not one output exactly (a file inside an
        output folder, or a folder that holds outputs): the md5s of those outputs in `locks`."""
        locks = self.locks if locks is None else locks
        found = {}
        for dep in self.stages[sid].deps:
            hits = self.producers(dep)
            if hits and [out for _, out in hits] != [dep]:
                md5s = {out: md5 for p, out in hits if (md5 := out_md5(locks, p, out))}
                if md5s:
                    found[dep] = md5s
        return found


def out_md5(locks: dict[str, dict], sid: str, out: str) -> str | None:
    return next((o.get("md5") for o in locks.get(sid, {}).get("outs", []) if o["path"] == out), None)


def pipelines(root: Path) -> list[str]:
    """The dvc.yaml files under `root` (the root's first), as DVC finds them."""
    found = [ROOT_PIPELINE] if (root / ROOT_PIPELINE).is_file() else []
    for path in sorted((root / "pipelines").rglob("dvc.yaml")) if (root / "pipelines").is_dir() else []:
        found.append(path.relative_to(root).as_posix())
    return found


def stage_id(pipeline: str, name: str) -> str:
    return name if pipeline == ROOT_PIPELINE else f"{pipeline}:{name}"


def pipeline_of(sid: str) -> str:
    return sid.split(":", 1)[0] if ":" in sid else ROOT_PIPELINE


def lock_file(pipeline: str) -> str:
    return str(Path(pipeline).with_name("dvc.lock"))


def runs_file(pipeline: str) -> str:
    """Where a pipeline's run records live: beside its lock (the root pipeline's under pipelines/)."""
    return "pipelines/runs.json" if pipeline == ROOT_PIPELINE else str(Path(pipeline).with_name("runs.json"))


def read_lock(text: str) -> dict[str, dict]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return (yaml.load(text, Loader=loader) or {}).get("stages", {}) if text.strip() else {}


def load(root: Path) -> Lineage:
    """The stages DVC expands from every dvc.yaml under `root`, their lock entries and run records."""
    from dvc.repo import Repo

    repo = Repo(str(root))
    try:
        stages = {}
        for s in repo.index.stages:
            pipeline = Path(s.dvcfile.path).resolve().relative_to(root.resolve()).as_posix()
            wdir = Path(s.wdir).resolve().relative_to(root.resolve())

            def where(p: str, wdir: Path = wdir) -> str:
                return p if str(wdir) == "." else (wdir / p).as_posix()

            sid = stage_id(pipeline, s.name)
            stages[sid] = StageDef(
                sid,
                pipeline,
                tuple(where(d.def_path) for d in s.deps),
                tuple(where(o.def_path) for o in s.outs),
            )
    finally:
        repo.close()
    locks: dict[str, dict] = {}
    runs: dict[str, dict] = {}
    for pipeline in pipelines(root):
        lock = root / lock_file(pipeline)
        for name, entry in read_lock(lock.read_text() if lock.is_file() else "").items():
            locks[stage_id(pipeline, name)] = entry
        record = root / runs_file(pipeline)
        if record.is_file():
            runs.update({stage_id(pipeline, k): v for k, v in json.loads(record.read_text()).items()})
    return Lineage(root, stages, locks, runs)


def code_changes(root: Path) -> dict[str, list[str]]:
    """Stage id -> its deps (and `command`) that `dvc status` finds changed: DVC's own hashing of the
    files in the working tree. The caller keeps those no stage produces (code, config, committed
    files): another stage's output is judged from the locks, as it may not be built here."""
    command = [sys.executable, "-m", "dvc", "status", "--json"]
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    out = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=900, env=env)
    if out.returncode != 0:
        said = [line for line in (out.stderr + out.stdout).splitlines() if line.strip()]
        raise RuntimeError(f"dvc status failed: {said[0] if said else f'exit {out.returncode}'}")
    changed: dict[str, set[str]] = {}
    for sid, entries in json.loads(out.stdout or "{}").items():
        for entry in entries:
            if entry == "changed command":
                changed.setdefault(sid, set()).add("command")
            elif isinstance(entry, dict):
                for path, state in entry.get("changed deps", {}).items():
                    changed.setdefault(sid, set()).add(path if isinstance(state, str) else f"{path} (params)")
    return {sid: sorted(paths) for sid, paths in changed.items()}


def git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def head(root: Path) -> str:
    return git(root, "rev-parse", "--short=7", "HEAD") or "unknown"
