"""A pipeline's metrics, one table per stage: what `dvc metrics show` holds, grouped so it reads.

    python -m scripts.metrics                                    # the default run, stage by stage
    python -m scripts.metrics pretrain evaluate                  # those stages only
    python -m scripts.metrics --pipeline pipelines/experiments/dvc.yaml
    python -m scripts.metrics evaluate --rev HEAD~3              # a commit's values beside the workspace's
    python -m scripts.metrics finetune_summary --rev exp-1a2b3   # a `dvc exp run` (smoke) beside the workspace

`dvc metrics show` puts every metrics file of the repository (both pipelines and the benchmarks) in
one table whose columns are the union of their keys: hundreds of columns, mostly empty. This reads
the same values through DVC (`Repo.metrics.show`, so `--rev` takes what DVC takes: a commit, a
branch, an experiment's name) and prints a Markdown table per stage of one dvc.yaml: a row per key
(nested keys joined with '.'), a column per file, a stage's foreach instances side by side. The
benchmarks' files, listed at the top of dvc.yaml, are the groups `bench/<name>`. A key a file lacks is '-'.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import yaml

from lmforge.stage import flatten  # nested keys joined with '.', as the MLflow params are

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = "workspace"


def groups(repo, pipeline: str) -> dict[str, list[tuple[str, str]]]:
    """{stage: [(column, metrics file)]} for the stages of `pipeline` (a dvc.yaml, relative to the
    repository root) in its order; `bench/<name>` for each top-level metrics file of dvc.yaml."""
    out: dict[str, list[tuple[str, str]]] = {}
    for stage in repo.index.stages:
        if stage.dvcfile.relpath != pipeline:
            continue
        files = [str(out_.def_path) for out_ in stage.outs if out_.metric]
        name, _, instance = stage.name.partition("@")
        for path in files:
            column = (
                instance if instance and len(files) == 1 else (f"{instance} {path}" if instance else path)
            )
            out.setdefault(name, []).append((column, path))
    if pipeline == "dvc.yaml":  # the benchmarks' files: dvc.yaml's own `metrics:` list
        for path in yaml.safe_load((ROOT / pipeline).read_text()).get("metrics", []):
            out[f"bench/{Path(path).stem}"] = [(path, path)]  # no keys in common: a table each
    return out


def shown(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.5g}"
    return str(value)


def table(columns: list[tuple[str, str]], values: dict[str, dict[str, dict]], revs: list[str]) -> list[str]:
    """Markdown: a row per key of any file, a column per file (and per rev when there are several)."""
    heads = [(column, path, rev) for column, path in columns for rev in revs]
    keys: list[str] = []
    for _, path, rev in heads:
        keys += [key for key in values[rev].get(path, {}) if key not in keys]
    label = (lambda c, r: c) if len(revs) == 1 else (lambda c, r: f"{c} ({r})")
    lines = [
        "| metric | " + " | ".join(label(c, r) for c, _, r in heads) + " |",
        "|---" * (len(heads) + 1) + "|",
    ]
    for key in keys:
        cells = [shown(values[rev].get(path, {}).get(key)) for _, path, rev in heads]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stages", nargs="*", help="stage names (without @instance); default: all")
    parser.add_argument("--pipeline", default="dvc.yaml", help="the dvc.yaml whose stages to show")
    parser.add_argument("--rev", action="append", default=[], help="a revision to show beside the workspace")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the output, not in a traceback

    from dvc.repo import Repo
    from dvc.scm import RevError

    if not (ROOT / args.pipeline).is_file():
        print(
            f"error: --pipeline {args.pipeline}: no such file; expected a dvc.yaml of this repository",
            file=sys.stderr,
        )
        return 2
    with Repo(str(ROOT)) as repo:
        found = groups(repo, args.pipeline)
        if unknown := [name for name in args.stages if name not in found]:
            print(
                f"error: no metrics for stage(s) {', '.join(unknown)} in {args.pipeline}; "
                f"expected one of: {', '.join(found)}",
                file=sys.stderr,
            )
            return 2
        chosen = {name: found[name] for name in (args.stages or found)}
        paths = [path for columns in chosen.values() for _, path in columns]
        try:
            data = repo.metrics.show(targets=paths, revs=args.rev or None, hide_workspace=False)
        except RevError as error:
            print(f"error: --rev: {error}; expected a commit, branch or experiment name", file=sys.stderr)
            return 2
    revs = [WORKSPACE, *args.rev]
    if "" in data:  # DVC names the workspace "" when no revision is asked for
        data[WORKSPACE] = data.pop("")
    values = {
        rev: {
            path: flatten(entry.get("data", {})) for path, entry in data.get(rev, {}).get("data", {}).items()
        }
        for rev in revs
    }
    for name, columns in chosen.items():
        print(f"## {name}\n")
        print("\n".join(table(columns, values, revs)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
