"""Records in dvc.lock the code and config deps of stages whose code changed only in ways that
cannot change an output, after proving it; every other change needs `dvc repro`.

A lock entry says: these outputs came from these inputs. When a stage's code deps are re-expressed
(a folder dep split into the files the stage reads, a dep it never read dropped) or a file it reads
changed only in form (a .py file whose syntax tree is unchanged once docstrings are dropped, a .yaml
file whose parsed value is unchanged), its outputs are those the current code makes, and the new
hashes may be recorded without running it. The proof is against a git revision (`--base`, HEAD by
default) whose code the lock records:

1. at the base revision, `dvc status` finds none of the stage's code or config deps changed, its
   command included (so the base's files made its outputs);
2. now, its command is the base's, and every file under each of its code and config deps existed at
   the base inside one of the stage's deps there, with a content equal in form to today's; or,
   where code moved between files (a module split, a definition given a new home, an import made
   lazy), its entry points make one program at the base and now: every name they reach denotes a
   definition of the same form in both, wherever it lives (scripts/same_program.py says how).

Stages that pass have their code and config deps' hashes (and params values) written; data deps and
outputs keep what the lock records. Two outputs record a hash of code bytes rather than of what the
code does: a pretraining run's `fingerprint.txt` (its resume stamp, over the code its stage imports,
`lmforge.codebase`) keeps the hash of the code that ran, which only makes `train.resume=auto` start afresh; the scaling
sweep's cell keys (over the code `lmforge.scaling.grid.CELL_MODULE` imports) are in its reports, so a stage that
runs the sweep is never relocked across a byte change to those files. The others are listed with the first file that failed. A
rewritten pipelines/experiments/dvc.lock is data of the root `findings` stage: rerun it after
(`dvc repro -s findings`, seconds).

What it still does that DVC and `make status` cannot: spare the default pipeline, which is rerun at
every commit, a rerun after a change that provably moves no output. The experiments no longer need it:
they may lag the code, marked stale, until `make catch-up` reruns them (docs/pipeline.md#landing-in-steps).

    python -m scripts.relock                  # against HEAD: record what is proven, list the rest
    python -m scripts.relock --base 0c48e64   # against another commit
    python -m scripts.relock --dry-run        # list only
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import shlex
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

import yaml

from scripts.dvc_yaml import RECORDS
from scripts.same_program import without_docstrings

ROOT = Path(__file__).resolve().parents[1]
CODE = ("src", "conf", "pipelines")
PIPELINES = ("dvc.yaml", "pipelines/experiments/dvc.yaml")


def is_code(dep: str) -> bool:
    return Path(dep).parts[0] in CODE and Path(dep).name not in RECORDS


def code_status(repo: Path) -> dict[str, set[str]]:
    """Stage -> the code and config deps (or 'command') that `dvc status` in `repo` reports changed.
    Outputs and data deps are left out: a scratch copy has none of them."""
    command = [sys.executable, "-m", "dvc", "status", "--json"]
    out = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(out.stdout[-2000:] + out.stderr[-2000:])
    changed: dict[str, set[str]] = {}
    for stage, entries in json.loads(out.stdout or "{}").items():
        for entry in entries:  # {"changed deps": {path: state}}, {"changed outs": ...} or "changed command"
            deps = entry.get("changed deps", {}) if isinstance(entry, dict) else {}
            paths = ["command"] if entry == "changed command" else [p for p in deps if is_code(p)]
            changed.setdefault(stage, set()).update(paths)
    return {stage: paths for stage, paths in changed.items() if paths}


def record_code_deps(repo: Path, only: set[str] | None = None) -> None:
    """Write the current hashes of every code and config dep (of the stages in `only`, all when None)
    into `repo`'s dvc.lock files, as `dvc repro` would after running each stage; data deps and
    outputs keep their recorded hashes."""
    from dvc.repo import Repo

    dvc = Repo(str(repo))
    try:
        with dvc.lock:
            by_file: dict[str, list] = {}
            for stage in dvc.index.stages:
                if only is not None and _label(stage, repo) not in only:
                    continue
                for dep in stage.deps:
                    if is_code(_path(stage, dep, repo)):
                        dep.save()
                by_file.setdefault(stage.dvcfile.path, []).append(stage)
            for stages in by_file.values():  # one rewrite a lock file: ruamel takes seconds a pass
                stages[0].dvcfile.dump_stages(stages, update_pipeline=False)
    finally:
        dvc.close()


def _label(stage, repo: Path) -> str:
    """The stage's name as `dvc status` prints it: `name`, or `<file>:name` outside the root."""
    pipeline = Path(stage.dvcfile.path).resolve().relative_to(repo.resolve()).as_posix()
    return stage.name if pipeline == "dvc.yaml" else f"{pipeline}:{stage.name}"


def _path(stage, dep, repo: Path) -> str:
    """A dep's path relative to the repository root (a stage's `wdir` may be elsewhere)."""
    return Path(dep.fs_path).resolve().relative_to(repo.resolve()).as_posix()


# -- equal in form ---------------------------------------------------------------------------------


def same_form(name: str, before: bytes, after: bytes) -> bool:
    """Whether two versions of file `name` must behave the same: equal bytes; for .py, equal syntax
    trees once docstrings are dropped (comments and layout are not in the tree); for .yaml, equal
    parsed values (comments and layout are not in the value)."""
    if before == after:
        return True
    try:
        if name.endswith(".py"):
            dump = [ast.dump(without_docstrings(ast.parse(text))) for text in (before, after)]
            return dump[0] == dump[1]
        if name.endswith((".yaml", ".yml")):
            return yaml.safe_load(before) == yaml.safe_load(after)
    except (SyntaxError, yaml.YAMLError):
        return False
    return False


# -- the proof -------------------------------------------------------------------------------------


def checkout(rev: str, dest: Path, root: Path = ROOT) -> Path:
    """The files of revision `rev` of `root`, as a fresh git repository of one commit."""
    archive = subprocess.run(["git", "archive", rev], cwd=root, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    git = ["git", "-c", "user.name=relock", "-c", "user.email=relock@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", rev]):
        subprocess.run(git + args, cwd=dest, check=True)
    return dest


def stage_deps(repo: Path) -> dict[str, tuple[list[str], set[str], str]]:
    """Stage label -> (its code and config deps, its data deps, relative to the root; its command)."""
    from dvc.repo import Repo

    dvc = Repo(str(repo))
    try:
        out = {}
        for stage in dvc.index.stages:
            paths = [_path(stage, d, repo) for d in stage.deps]
            cmd = stage.cmd if isinstance(stage.cmd, str) else "\n".join(stage.cmd)
            out[_label(stage, repo)] = (
                [p for p in paths if is_code(p)],
                {p for p in paths if not is_code(p)},
                cmd,
            )
        return out
    finally:
        dvc.close()


def files_under(root: Path, dep: str) -> list[str]:
    """The files DVC hashes for a dep: the file, or every file under the folder but bytecode caches."""
    path = root / dep
    if path.is_file():
        return [dep]
    return sorted(
        p.relative_to(root).as_posix()
        for p in path.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


def prove(base: Path, now: Path) -> tuple[set[str], dict[str, str]]:
    """(stages proven unchanged, stage -> why not) for the working tree `now` against `base`."""
    stale_at_base = code_status(base)
    before, after = stage_deps(base), stage_deps(now)
    proven, refused = set(), {}
    for label, (deps, data, cmd) in sorted(after.items()):
        if label not in before:
            refused[label] = "a new stage"
            continue
        if label in stale_at_base:
            refused[label] = f"stale at the base already ({', '.join(sorted(stale_at_base[label]))})"
            continue
        old_deps, old_data, old_cmd = before[label]
        if data != old_data:
            refused[label] = f"its data deps changed ({sorted(data ^ old_data)})"
            continue
        covered = {f for d in old_deps for f in files_under(base, d)}
        why, configs_same, moved = None, True, []
        for name in (f for d in deps for f in files_under(now, d)):
            if name in covered and same_form(name, (base / name).read_bytes(), (now / name).read_bytes()):
                continue
            if name.startswith("conf/"):
                configs_same = False
            elif name.endswith(".py"):  # code that changed file by file: one program, or not (below)
                moved.append(name)
            else:
                why = f"{name} changed" if name in covered else f"{name} was not among its deps at the base"
                break
        if why is None and (keyed := _rekeyed(base, now, deps)):
            why = (
                f"{keyed} changed, and its bytes key the scaling store, whose keys are in the sweep's reports"
            )
        if why is None and moved and (differs := _one_program(base, old_cmd, now, cmd)):
            why = f"{moved[0]} changed ({differs})"
        if why is None and (cmd != old_cmd or not configs_same):
            why = same_plans(base, old_cmd, now, cmd)
        if why:
            refused[label] = why
        else:
            proven.add(label)
    return proven, refused


def _rekeyed(base: Path, now: Path, deps: list[str]) -> str | None:
    """For a stage that runs the scaling sweep (its deps hold scaling/grid.py): the first file whose
    bytes key the sweep's cells (what `lmforge.scaling.grid.CELL_MODULE` imports) and differ from the
    base's, a docstring edit included; those keys are written into the sweep's reports, so only a
    rerun records them."""
    from lmforge.codebase import SRC, module_code
    from lmforge.scaling.grid import CELL_MODULE

    grid = "src/lmforge/scaling/grid.py"
    if not any(grid == d or grid.startswith(f"{d}/") for d in deps):
        return None
    for path in module_code(CELL_MODULE):
        name = (Path("src") / path.relative_to(SRC)).as_posix()
        if _bytes(base, name) != _bytes(now, name):
            return name
    return None


def _bytes(root: Path, name: str) -> bytes | None:
    return (root / name).read_bytes() if (root / name).is_file() else None


def _entries(cmd: str) -> list[str]:
    """The entry points a stage's commands run (`pipelines/<x>.py`), in order."""
    return [next(w for w in shlex.split(line) if w.endswith(".py")) for line in cmd.splitlines()]


def _one_program(base: Path, old_cmd: str, now: Path, cmd: str) -> str | None:
    """None when the stage's entry points make one program at the base and now, wherever their
    definitions live (scripts/same_program.py); else why not."""
    if _entries(old_cmd) != _entries(cmd):
        return "its command runs other entry points"
    return _same_program(base, now, tuple(_entries(cmd)))


@functools.cache
def _same_program(base: Path, now: Path, entries: tuple[str, ...]) -> str | None:
    from scripts.dvc_yaml import OBSERVABILITY
    from scripts.same_program import same_program

    return same_program(base, now, list(entries), OBSERVABILITY)


def same_plans(base: Path, old_cmd: str, now: Path, cmd: str) -> str | None:
    """None when every job of the stage's commands composes, from today's conf/ and command, the plan
    it composed from the base's (the validated values of what the stage reads: all a stage sees);
    else why not. Its code is proven equal in form already, so today's code parses both."""
    old, new = _jobs(base, old_cmd), _jobs(now, cmd)
    if [(e, len(j)) for e, j in old] != [(e, len(j)) for e, j in new]:
        return "its command runs other entry points or jobs"
    for (entry, old_jobs), (_, new_jobs) in zip(old, new):
        for before, after in zip(old_jobs, new_jobs):
            try:
                if _plan(base, entry, before) != _plan(now, entry, after):
                    return f"{entry} {' '.join(after)}: its config changed"
            except Exception as err:  # a config the composition API cannot resolve alone
                return f"{entry} {' '.join(after)}: cannot compose its config ({str(err).splitlines()[0]})"
    return None


def _jobs(repo: Path, cmd: str) -> list[tuple[str, list[list[str]]]]:
    """Each command's entry point and the overrides of each job it runs."""
    from scripts.dvc_yaml import sweep_jobs

    found = []
    for line in cmd.splitlines():
        words = shlex.split(line)
        at = next(i for i, w in enumerate(words) if w.endswith(".py"))
        found.append((Path(words[at]).stem, sweep_jobs(words[at + 1 :], repo / "conf")))
    return found


def _plan(repo: Path, entry: str, overrides: list[str]) -> dict:
    """The plain values the stage's door validates for one job composed from `repo`'s conf/."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    import pipelines

    with initialize_config_dir(config_dir=str(repo / "conf"), version_base="1.3"):
        cfg = compose(config_name=pipelines.STAGES[entry], overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # `${hydra:job.override_dirname}` resolves as in a run
    with open_dict(cfg):
        del cfg["hydra"]
    return pipelines.stage(entry).visible(cfg).values


def relock(root: Path = ROOT, base: str = "HEAD", dry_run: bool = False) -> tuple[set[str], dict[str, str]]:
    """Record the stages of `root` proven unchanged against revision `base`; returns (recorded,
    stage -> why it needs `dvc repro`), both among the stages whose code or config deps changed."""
    with tempfile.TemporaryDirectory() as tmp:
        proven, refused = prove(checkout(base, Path(tmp) / "base", root), root)
    changed = code_status(root)
    recorded = {s for s in proven if s in changed}
    if recorded and not dry_run:
        record_code_deps(root, recorded)
    return recorded, {s: why for s, why in refused.items() if s in changed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the revision whose code dvc.lock records")
    parser.add_argument("--dry-run", action="store_true", help="list what would be recorded, write nothing")
    args = parser.parse_args(argv)
    recorded, refused = relock(ROOT, args.base, args.dry_run)
    for label in sorted(recorded):
        print(f"{'provable' if args.dry_run else 'recorded'}: {label}")
    for label, why in sorted(refused.items()):
        print(f"needs dvc repro: {label}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
