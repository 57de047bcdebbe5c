"""`python -m lmforge.freshness status [--write] | catch-up --budget 2h | repro [targets]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmforge.freshness import marks
from lmforge.freshness.run import catch_up, parse_budget, refresh, repro
from lmforge.freshness.status import compute, render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmforge.freshness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    status = sub.add_parser("status", help="the owed stages of both pipelines, with hours")
    status.add_argument("--write", action="store_true", help="rewrite stale.json and the docs' marks")
    status.add_argument("--check", action="store_true", help="exit 1 when a mark is out of date")
    catch = sub.add_parser("catch-up", help="rerun owed stages within a budget")
    catch.add_argument("--budget", required=True, help="2h, 90m, 600s")
    rep = sub.add_parser("repro", help="dvc repro, each stage timed and recorded")
    rep.add_argument("targets", nargs="*")
    args = parser.parse_args(argv)
    root = Path.cwd()
    if not (root / "dvc.yaml").is_file():
        print(f"{root}: no dvc.yaml here; run from the repository root", file=sys.stderr)
        return 2
    try:
        return dispatch(args, root)
    except RuntimeError as err:  # DVC refused (another `dvc repro` holds the lock, a broken dvc.yaml)
        print(err, file=sys.stderr)
        return 1


def dispatch(args: argparse.Namespace, root: Path) -> int:
    if args.command == "status":
        if args.write:
            code = refresh(root)
            print(render(compute(root)))
            return code
        state = compute(root)
        print(render(state))
        wrong = marks.out_of_date(root, state)
        if wrong:
            print(f"marks out of date (run `make status WRITE=1`): {', '.join(wrong)}")
            return 1 if args.check else 0
        return 0
    if args.command == "catch-up":
        try:
            budget = parse_budget(args.budget)
        except ValueError as err:
            print(err, file=sys.stderr)
            return 2
        return catch_up(root, budget)
    return repro(root, args.targets)


if __name__ == "__main__":
    sys.exit(main())
