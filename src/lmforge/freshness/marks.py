"""The marks that show a stale experiment wherever its numbers are read.

- `pipelines/experiments/stale.json`: each owed experiment stage, the commit it was measured at, what
  changed since, and the report paths it wrote. The `findings` stage depends on it and marks every
  part that read one of those reports.
- The docs: a page that quotes a report of an owed stage carries, under its title, a generated block
  that names the stage, its commit and what changed since. `make status` rewrites the blocks; a test
  fails when one is missing or out of date.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from lmforge.freshness.status import Owed, Status, short
from lmforge.io import write_json, write_text

STALE_FILE = "pipelines/experiments/stale.json"
EXPERIMENTS = "pipelines/experiments/dvc.yaml"
BEGIN = "<!-- stale-marks: written by `make status` from pipelines/experiments/stale.json; do not edit -->"
END = "<!-- /stale-marks -->"
BLOCK = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n\n?", re.S)
QUOTED = re.compile(r"(?:reports|sweeps)/[A-Za-z0-9_./*-]+")


def mark(o: Owed) -> str:
    """`stale: measured at <commit>, changed since: <deps>` for one owed stage."""
    what = list(o.changed) + [f"{a.split(':')[-1]} is owed a rerun" for a in o.after]
    if o.measured_at is None:
        return "stale: never run (a stage new since the last catch-up)"
    return f"stale: measured at {o.measured_at}, changed since: {short(what, 4)}"


def stale_record(status: Status) -> dict:
    """The experiments' owed stages as `findings` reads them."""
    stages = {}
    for o in status.of(EXPERIMENTS):
        name = o.id.split(":", 1)[1]
        stages[name] = {
            "measured_at": o.measured_at,
            "changed": o.changed,
            "after": [a.split(":")[-1] for a in o.after],
            "mark": mark(o),
            "outs": list(status.lineage.stages[o.id].outs),
        }
    return {"stages": stages}


def cites(text: str, outs: tuple[str, ...], others: tuple[str, ...]) -> list[str]:
    """The report paths in `text` that are one of `outs` or lie in one, or are a folder (or a pattern)
    holding some of `outs` and none of `others` (the outputs of the default pipeline)."""
    found = []
    for path in dict.fromkeys(m.rstrip(".") for m in QUOTED.findall(text)):
        stem = path.split("*")[0] if "*" in path else path.rstrip("/") + "/"
        if any(path.rstrip("/") == o or path.startswith(o.rstrip("/") + "/") for o in outs):
            found.append(path)
        elif any(o.startswith(stem) for o in outs) and not any(o.startswith(stem) for o in others):
            found.append(path)
    return found


def docs_block(text: str, status: Status) -> str:
    """The block a page should carry for the owed experiment stages whose reports it quotes ("" if none)."""
    body = BLOCK.sub("", text)
    lines = []
    stages = status.lineage.stages
    others = tuple(out for sid, s in stages.items() if s.pipeline != EXPERIMENTS for out in s.outs)
    for o in status.of(EXPERIMENTS):
        quoted = cites(body, stages[o.id].outs, others)
        if quoted:
            name = o.id.split(":", 1)[1]
            lines.append(f"> - `{name}` (quoted as {', '.join(f'`{q}`' for q in quoted[:3])}): {mark(o)}")
    if not lines:
        return ""
    head = (
        "> **Stale numbers on this page.** These experiments ran on older code; their figures below are "
        "their last measurement until `make catch-up` reruns them (docs/pipeline.md#landing-in-steps):"
    )
    return "\n".join([BEGIN, head, *lines, END]) + "\n\n"


def with_block(text: str, block: str) -> str:
    """`text` with its marks block replaced by `block`, placed after the page's first heading."""
    body = BLOCK.sub("", text)
    if not block:
        return body
    lines = body.split("\n")
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
    while at < len(lines) and not lines[at].strip():
        at += 1
    return "\n".join(lines[:at]) + ("\n" if at else "") + block + "\n".join(lines[at:])


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _differing(root: Path, status: Status) -> dict[str, str | dict]:
    """{file: what it should hold} for each mark file that differs from what `status` says (stale.json:
    its record; a page: its text)."""
    wrong: dict[str, str | dict] = {}
    record, path = stale_record(status), root / STALE_FILE
    if not path.is_file() or json.loads(path.read_text()) != record:
        wrong[STALE_FILE] = record
    for page in filter(Path.is_file, pages(root)):
        text = page.read_text()
        new = with_block(text, docs_block(text, status))
        if new != text:
            wrong[page.relative_to(root).as_posix()] = new
    return wrong


def out_of_date(root: Path, status: Status) -> list[str]:
    """The mark files `write` would change: empty when every mark is current."""
    return list(_differing(root, status))


def write(root: Path, status: Status) -> list[str]:
    """Write the mark files that are out of date; returns them."""
    wrong = _differing(root, status)
    for name, content in wrong.items():
        if isinstance(content, dict):
            write_json(root / name, content)
        else:
            write_text(root / name, content)
    return list(wrong)
