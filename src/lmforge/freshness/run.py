"""Running stages through DVC and recording each one's duration from the run itself.

`repro` is `make repro`: `dvc repro` of the root pipeline, each stage timed from DVC's own "Running
stage" lines. `catch_up` is `make catch-up`: the owed stages in dependency order, one `dvc repro
<stage>` each (DVC builds an input that is not built here first, and locks each stage as it ends, so a
kill loses at most the running one), never starting a stage whose last duration exceeds what is left
of the budget; a stage never timed runs with the rest of the budget as its limit, and if stopped there
is recorded as needing more. Both then rewrite the marks and rerun `findings` when they moved.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from lmforge.freshness import marks
from lmforge.freshness.lineage import git, head, load, pipeline_of
from lmforge.freshness.records import certified, from_history, save
from lmforge.freshness.status import compute, minutes, render

RUNNING = re.compile(r"Running stage '([^']+)'")


@dataclass
class Outcome:
    code: int  # the command's exit status (None -> stopped at its time limit)
    seconds: dict[str, float] = field(default_factory=dict)  # stage -> seconds, in the order they ran
    stopped: bool = False


def timed(command: list[str], root: Path, limit: float | None = None) -> Outcome:
    """Run `command`, echo its output, and time each DVC stage from its "Running stage" line to the
    next one (or the end); stop the whole process group after `limit` seconds."""
    # unbuffered: each line must arrive when DVC writes it, or the stages' times run together
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
        env=env,
    )
    outcome = Outcome(0)
    current, began = None, time.monotonic()

    def close(now: float) -> None:
        if current is not None:
            outcome.seconds[current] = round(outcome.seconds.get(current, 0.0) + now - began, 1)

    assert process.stdout is not None

    def stop() -> None:
        outcome.stopped = True
        for sig, grace in ((signal.SIGTERM, 60), (signal.SIGKILL, 0)):
            if process.poll() is not None:
                return
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            time.sleep(grace)

    timer = threading.Timer(limit, stop) if limit is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    for line in process.stdout:
        print(line, end="", flush=True)
        hit = RUNNING.search(line)
        if hit:
            now = time.monotonic()
            close(now)
            current, began = hit.group(1), now
    process.wait()
    if timer is not None:
        timer.cancel()
    close(time.monotonic())
    outcome.code = process.returncode
    return outcome


def commit_of(root: Path) -> str:
    """HEAD, with `+` when the code or config under it has uncommitted changes."""
    dirty = git(root, "status", "--porcelain", "--", "src", "conf", "pipelines/*.py", "pipelines/*.yaml")
    return head(root) + ("+" if dirty else "")


def refresh(root: Path, announce: bool = True) -> int:
    """Records for stages that have none (from git history), then stale.json and the docs' marks; when
    stale.json moved, `dvc repro -s findings` (its inputs are committed reports) so the findings
    carry the marks. Returns an exit status."""
    lineage = load(root)
    recovered = from_history(root, lineage)
    if recovered:
        save(root, lineage, recovered)
    status = compute(root, lineage)
    changed = marks.write(root, status)
    if announce and changed:
        print(f"marks rewritten: {', '.join(changed)}")
    if marks.STALE_FILE in changed and "findings" in lineage.stages:
        return subprocess.run([sys.executable, "-m", "dvc", "repro", "-s", "findings"], cwd=root).returncode
    return 0


def repro(root: Path, targets: list[str]) -> int:
    """`dvc repro` (of `targets`, the root pipeline by default), timing and recording every stage."""
    commit = commit_of(root)
    outcome = timed([sys.executable, "-m", "dvc", "repro", *targets], root)
    lineage = load(root)
    updates = {
        sid: {**certified(lineage, sid, commit), "seconds": s, "at_least": False}
        for sid, s in outcome.seconds.items()
        if sid in lineage.stages
    }
    if outcome.code == 0:  # every stage of the pipeline is now current: its inputs are today's
        for sid in lineage.stages:
            if pipeline_of(sid) == "dvc.yaml" and sid not in updates and sid in lineage.locks and not targets:
                updates[sid] = {"inputs": lineage.inputs_of(sid)}
    save(root, lineage, updates)
    if outcome.code != 0:
        return outcome.code
    return refresh(root)


def parse_budget(text: str) -> float:
    """'2h', '90m', '45s' or plain seconds -> seconds."""
    hit = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([hms]?)\s*", text)
    if not hit:
        raise ValueError(f"budget: got {text!r}, expected a duration such as 2h, 90m or 600s")
    value = float(hit.group(1)) * {"h": 3600, "m": 60, "s": 1, "": 1}[hit.group(2)]
    if value <= 0:
        raise ValueError(f"budget: got {text!r}, expected a duration > 0")
    return value


def catch_up(root: Path, budget: float) -> int:
    """Rerun owed stages in dependency order within `budget` seconds; print what ran and what remains."""
    start = time.monotonic()
    refresh(root, announce=False)  # records recovered for stages that have none
    status = compute(root)
    ran: list[str] = []
    left_out: dict[str, str] = {}
    failed = 0
    for owed in status.owed:
        blocked = [a for a in owed.after if a in left_out or a not in ran]
        if blocked:
            left_out[owed.id] = f"after {blocked[0]}"
            continue
        remaining = budget - (time.monotonic() - start)
        if owed.seconds is not None and owed.seconds > remaining:
            need = minutes(owed.seconds, owed.at_least)
            left_out[owed.id] = f"needs {need}, {remaining / 60:.1f} min left"
            continue
        if remaining < 1:
            left_out[owed.id] = "no budget left"
            continue
        print(
            f"catch-up: {owed.id} ({minutes(owed.seconds, owed.at_least)}; {remaining / 60:.1f} min left)",
            flush=True,
        )
        commit = commit_of(root)
        outcome = timed([sys.executable, "-m", "dvc", "repro", owed.id], root, limit=remaining)
        lineage = load(root)
        updates = {}
        for sid, seconds in outcome.seconds.items():
            if sid not in lineage.stages:
                continue
            finished = outcome.code == 0 or sid != list(outcome.seconds)[-1]
            if finished:
                updates[sid] = {**certified(lineage, sid, commit), "seconds": seconds, "at_least": False}
            elif outcome.stopped:  # stopped at the budget: it needs more than it had
                updates[sid] = {"seconds": seconds, "at_least": True}
        if outcome.code == 0 and owed.id not in outcome.seconds and owed.id in lineage.stages:
            # DVC found it current (what changed under it did not change the file it reads)
            updates[owed.id] = {"inputs": lineage.inputs_of(owed.id)}
        save(root, lineage, updates)
        if outcome.code == 0:
            ran.append(owed.id)
        else:
            failed += 1
            left_out[owed.id] = (
                "stopped at the budget" if outcome.stopped else f"failed (exit {outcome.code})"
            )
    refresh(root)
    print(
        f"catch-up ran {len(ran)} stages in {(time.monotonic() - start) / 60:.1f} min: {', '.join(ran) or 'none'}"
    )
    for sid, why in left_out.items():
        print(f"  left: {sid}: {why}")
    print(render(compute(root)))
    return 1 if failed else 0
