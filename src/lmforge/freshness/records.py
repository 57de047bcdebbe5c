"""Run records: written for each stage a run finishes (catch-up, `make repro`), and recovered once from
git history for stages that ran before records existed.

A stage's record is written only when DVC has just certified it (it ran, or `dvc status` finds it
current), so its `inputs` are the producer folders' md5s in the locks at that moment.
"""

from __future__ import annotations

import json
from pathlib import Path

from lmforge.freshness.lineage import (
    Lineage,
    git,
    lock_file,
    pipeline_of,
    pipelines,
    read_lock,
    runs_file,
    stage_id,
)
from lmforge.io import write_json


def save(root: Path, lineage: Lineage, updates: dict[str, dict]) -> None:
    """Merge `updates` (id -> fields) into the records of `lineage` and write each pipeline's file."""
    for sid, fields in updates.items():
        lineage.runs[sid] = {**lineage.runs.get(sid, {}), **fields}
    for pipeline in pipelines(root):
        prefix = "" if pipeline == "dvc.yaml" else f"{pipeline}:"
        mine = {
            sid[len(prefix) :]: lineage.runs[sid]
            for sid in lineage.stages
            if pipeline_of(sid) == pipeline and sid in lineage.runs
        }
        if mine:
            path = root / runs_file(pipeline)
            text = json.dumps(mine, indent=1, sort_keys=True) + "\n"
            if not path.is_file() or path.read_text() != text:
                write_json(path, mine)


def certified(lineage: Lineage, sid: str, commit: str) -> dict:
    """The record of a stage DVC has just certified at `commit` (its seconds are the caller's)."""
    return {"commit": commit, "inputs": lineage.inputs_of(sid)}


def locks_at(root: Path, commit: str) -> dict[str, dict]:
    """Every pipeline's lock entries at `commit`, keyed by stage id."""
    found: dict[str, dict] = {}
    for pipeline in pipelines(root):
        text = git(root, "show", f"{commit}:{lock_file(pipeline)}")
        found.update({stage_id(pipeline, k): v for k, v in read_lock(text).items()})
    return found


def from_history(root: Path, lineage: Lineage) -> dict[str, dict]:
    """Records for the locked stages that have none: the oldest commit since which its lock entry has
    been what it is now (the code that entry certifies), and the producer folders at that commit. An
    entry that differs from HEAD's was written in this working tree: it is recorded at HEAD."""
    missing = [sid for sid in lineage.stages if sid in lineage.locks and sid not in lineage.runs]
    if not missing:
        return {}
    head = git(root, "rev-parse", "--short=7", "HEAD")
    since: dict[str, str] = {}
    history: dict[str, dict[str, dict]] = {}
    for pipeline in {pipeline_of(s) for s in missing}:
        commits = git(root, "log", "--format=%h", "--abbrev=7", "--", lock_file(pipeline)).split()
        current = {s: lineage.locks[s] for s in missing if pipeline_of(s) == pipeline}
        open_ = set(current)
        for commit in commits:
            entries = history.setdefault(commit, locks_at(root, commit))
            for sid in list(open_):
                if entries.get(sid) == current[sid]:
                    since[sid] = commit
                else:
                    open_.discard(sid)
                    since.setdefault(sid, head)  # differs at HEAD already: written in the working tree
            if not open_:
                break
    found = {}
    for sid in missing:
        commit = since.get(sid, head)
        locks = lineage.locks if commit == head else history.get(commit) or locks_at(root, commit)
        found[sid] = {"commit": commit, "inputs": lineage.inputs_of(sid, locks)}
    return found
