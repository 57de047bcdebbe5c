"""Seconds per DVC stage of one pipeline run: run the command, time-stamp each stage's start.

    python3 -m benchmarks.stage_times -- make repro     # the default run (a fresh clone: install included)
    python3 -m benchmarks.stage_times --from LOG        # the table again, from the log such a run wrote
    python3 -m benchmarks.stage_times --markdown        # reports/bench/stage_times.json as docs/pipeline.md shows it
    python3 -m benchmarks.stage_times --mlflow          # the last `dvc repro`, from its runs in the MLflow store
    python3 -m benchmarks.stage_times --mlflow RUN_ID   # one pipeline run of the store (its parent run's id)

It echoes the command's output and keeps every line with its time in a log
(`.lmforge/logs/stage_times.log`). A stage runs from its "Running stage 'NAME'" line to the next
stage's, or to the command's end for the last one; a stage DVC skips ("didn't change") is listed with
no time. What comes before the first stage (for `make repro`: the install and `dvc_vars.py`) is
`before the first stage`. The result goes to reports/bench/stage_times.json (the seconds of each
stage, the total, the command, its exit status, the commit and the CPU), which the docs' stage times
come from. Only the standard library: it runs before `make repro` has built the virtual environment.

`--mlflow` needs no log: every stage run of a `dvc repro` is a descendant of that invocation's parent
run in the MLflow store (lmforge/tracking/runs.py), tagged with its DVC stage. A stage runs from its first
run's start to its last run's end (a multirun stage's jobs and a multi-command stage's processes
included), so the few seconds each process spends before it opens its run are not counted, and a
stage DVC skipped has no run. It reads the store that `MLFLOW_TRACKING_URI` names, else mlruns.db.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

LOG = Path(".lmforge/logs/stage_times.log")
REPORT = Path("reports/bench/stage_times.json")
RUNNING = re.compile(r"Running stage '([^']+)'")
SKIPPED = re.compile(r"Stage '([^']+)' didn't change, skipping")
MARK = (
    "#stage_times"  # its own log lines: "#stage_times start|host|end <time> <command|host json|exit status>"
)


class BadInput(ValueError):
    """What the user gave cannot be read: main() prints it on one line and exits 2."""


def record(command: list[str], log: Path) -> None:
    """Run `command`, echo its output, and write each line to `log` after its arrival time."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        out.write(f"{MARK} start {time.time():.3f} {json.dumps(command)}\n")
        out.write(
            f"{MARK} host {time.time():.3f} {json.dumps({'commit': commit(), 'cpu': cpu(), 'cores': os.cpu_count()})}\n"
        )
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            out.write(f"{time.time():.3f} {line}")
            out.flush()
        out.write(f"{MARK} end {time.time():.3f} {process.wait()}\n")


def table(log: Path) -> dict:
    """{stages: [{stage, seconds | None}], before_first_stage, stages_seconds, total_seconds, command,
    exit_code, and the commit, cpu and cores of the run}."""
    start = end = None
    command, exit_code, host = None, None, {}
    events: list[tuple[float, str, bool]] = []  # (time, stage, ran)
    for line in log.read_text().splitlines():
        if line.startswith(MARK):
            _, what, stamp, *rest = line.split(" ", 3)
            if what == "start":
                start, command = float(stamp), json.loads(rest[0])
            elif what == "host":
                host = json.loads(rest[0])
            else:
                end, exit_code = float(stamp), int(rest[0])
            continue
        stamp, _, text = line.partition(" ")
        if found := RUNNING.search(text):
            events.append((float(stamp), found.group(1), True))
        elif found := SKIPPED.search(text):
            events.append((float(stamp), found.group(1), False))
    if start is None or end is None:
        raise BadInput(f"{log}: no start and end lines of {MARK}; expected a log this tool wrote")
    ran = [(t, name) for t, name, did in events if did]
    stops = [t for t, _ in ran[1:]] + [end]
    seconds = {name: round(stop - t, 1) for (t, name), stop in zip(ran, stops)}
    stages = [{"stage": name, "seconds": seconds.get(name) if did else None} for _, name, did in events]
    first = ran[0][0] if ran else end
    return {
        "stages": stages,
        "before_first_stage": round(first - start, 1),
        "stages_seconds": round(end - first, 1),
        "total_seconds": round(end - start, 1),
        "command": command,
        "exit_code": exit_code,
        **host,  # commit, cpu and cores where the run happened
    }


def markdown(result: dict) -> str:
    """The stage-time table of docs/pipeline.md: one row per DVC stage (its foreach instances side by
    side), seconds and minutes; a test checks that the page holds this table for the committed report."""
    groups: dict[str, list[tuple[str, float | str | None]]] = {}
    for row in result["stages"]:
        stage, _, instance = row["stage"].partition("@")
        groups.setdefault(stage, []).append((instance, "resumed" if row.get("resumed") else row["seconds"]))
    lines = ["| stage | instances | seconds | minutes |", "|---|---|---|---|"]
    for stage, runs in groups.items():
        names = ", ".join(name for name, _ in runs if name)
        seconds = ", ".join(_shown(s) for _, s in runs)
        minutes = sum(s for _, s in runs if isinstance(s, float | int)) / 60
        lines.append(f"| {stage} | {names} | {seconds} | {minutes:.1f} |")
    lines.append(
        f"| **all stages** | | **{result['stages_seconds']:,.0f}** | **{result['stages_seconds'] / 60:.1f}** |"
    )
    return "\n".join(lines)


def _runs(client, top, tag: str) -> list:
    """The runs whose `tag` names the pipeline run `top`: its children (one per stage process, or a
    stage's own run over its jobs) by `mlflow.parentRunId`, the runs it continued by `lmforge_resumed_by`."""
    runs, token = [], None
    while True:
        page = client.search_runs(
            [top.info.experiment_id], f"tags.{tag} = '{top.info.run_id}'", max_results=1000, page_token=token
        )
        runs += list(page)
        if not (token := page.token):
            return runs


def from_mlflow(run_id: str | None = None, uri: str | None = None) -> dict:
    """The same table from the MLflow store: the pipeline run `run_id` (default: the last one
    started), its stages timed by the runs that carry their `dvc_stage` tag."""
    from mlflow.tracking import MlflowClient  # the one import outside the standard library

    uri = uri or os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlruns.db")
    client = MlflowClient(tracking_uri=uri)
    if run_id is None:
        ids = [e.experiment_id for e in client.search_experiments()]
        found = client.search_runs(
            ids, "tags.lmforge_level = 'pipeline'", order_by=["attributes.start_time DESC"], max_results=1
        )
        if not found:
            raise BadInput(f"{uri} holds no pipeline run; expected a store that a `dvc repro` wrote")
        top = found[0]
    else:
        try:
            top = client.get_run(run_id)
        except Exception:  # mlflow raises MlflowException for an unknown id
            raise BadInput(
                f"run {run_id!r} is not in {uri}; expected a pipeline run's id (--mlflow alone takes the last)"
            ) from None
    spans: dict[str, list[float | None]] = {}  # a stage's first start and last end, in seconds
    for run in _runs(client, top, "mlflow.parentRunId") + _runs(client, top, "lmforge_resumed_by"):
        stage, start, end = run.data.tags.get("dvc_stage"), run.info.start_time, run.info.end_time
        if stage is None or end is None:
            continue
        span = spans.setdefault(stage, [start / 1000, end / 1000])
        if start < top.info.start_time or span[0] is None:
            # a run this invocation continued (the scaling sweep's keeps its cells): it started in an
            # earlier one (and hangs from it, tagged lmforge_resumed_by), so its start says nothing here
            spans[stage] = [None, max(end / 1000, span[1])]
            continue
        span[0], span[1] = min(span[0], start / 1000), max(span[1], end / 1000)
    if not spans:
        raise BadInput(f"pipeline run {top.info.run_id} has no finished stage run in {uri} (still running?)")
    timed = [span for span in spans.values() if span[0] is not None]
    first = min(start for start, _ in timed) if timed else top.info.start_time / 1000
    last = max(end for _, end in spans.values())
    ordered = sorted(spans.items(), key=lambda item: item[1][0] if item[1][0] is not None else item[1][1])
    tags = top.data.tags
    dirty = "-dirty" if tags.get("git_dirty") == "true" else ""
    return {
        "stages": [
            {"stage": stage, "seconds": None, "resumed": True}
            if start is None
            else {"stage": stage, "seconds": round(end - start, 1)}
            for stage, (start, end) in ordered
        ],
        "before_first_stage": None,
        "stages_seconds": round(last - first, 1),
        "total_seconds": round(last - first, 1),
        "command": top.info.run_name,
        "exit_code": None,
        "commit": tags.get("git_commit", "unknown")[:7] + dirty,
        "mlflow_run": top.info.run_id,
    }


def _shown(seconds: float | str | None) -> str:
    """Seconds, or why there are none: DVC skipped the stage, or its run was resumed (not timed)."""
    if seconds is None:
        return "skipped"
    return seconds if isinstance(seconds, str) else f"{seconds:,.0f}"


def commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def cpu() -> str:
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def write(result: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, help="a log this tool wrote; nothing is run")
    parser.add_argument("--log", type=Path, default=LOG, help=f"where the run's log goes (default {LOG})")
    parser.add_argument("--markdown", action="store_true", help="print the docs' table instead")
    parser.add_argument(
        "--mlflow",
        nargs="?",
        const="",
        metavar="RUN_ID",
        help="time the stages of a pipeline run of the MLflow store (default: the last one); nothing is run",
    )
    parser.add_argument("command", nargs="*", help="the command to time, after --")
    args = parser.parse_args()
    if sum(bool(given) for given in (args.source, args.command, args.mlflow is not None)) > 1:
        parser.error("give one of: a command after --, --from LOG, --mlflow [RUN_ID]")
    if not (args.source or args.command or args.markdown or args.mlflow is not None):
        parser.error(
            "give a command after --, --from LOG, --mlflow, or --markdown (the table of the last report)"
        )
    if args.command:
        record(args.command, args.log)
    try:
        if args.mlflow is not None:
            result = from_mlflow(args.mlflow or None)
        elif args.markdown and not (args.source or args.command):
            result = json.loads(REPORT.read_text())  # the last timed run's report
        else:
            result = table(args.source or args.log)
    except BadInput as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    if args.markdown:
        print(markdown(result))
        return
    for row in result["stages"]:
        shown = f"{_shown('resumed' if row.get('resumed') else row['seconds']):>8s}"
        print(f"{row['stage']:40s} {shown}")
    if result["before_first_stage"] is not None:
        print(f"{'before the first stage':40s} {result['before_first_stage']:8.0f}")
    print(f"{'stages':40s} {result['stages_seconds']:8.0f}  ({result['stages_seconds'] / 60:.1f} min)")
    if result["exit_code"] is not None:
        print(
            f"{'total':40s} {result['total_seconds']:8.0f}  ({result['total_seconds'] / 60:.1f} min), exit {result['exit_code']}"
        )
    else:
        print(
            f"{'from':40s} {result['command']} (MLflow run {result['mlflow_run']}, commit {result['commit']})"
        )
    if args.command:
        write(result, REPORT)
    sys.exit(result["exit_code"] if args.command else 0)


if __name__ == "__main__":
    main()
