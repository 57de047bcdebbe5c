"""lmforge.freshness on a toy repository of two pipelines (real git and DVC, stages of a second):

- a code change makes its readers stale, and their consumers owed after them; an experiment that reads
  a default output the default rerun changed is stale by that output, judged from the locks alone
  (nothing built needed), while a stage whose outputs are merely absent is "not built", not owed;
- the marks: stale.json names each owed experiment with its commit and what changed, a docs page that
  quotes its report gets the generated block, and a current block is left alone;
- `catch-up` reruns a stale stage and records its seconds, never starts one whose last duration
  exceeds what is left, and a second call continues where the first stopped;
- budgets and marks against tiny references.

The slow test at the end lands a change in a scratch copy of this repository."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lmforge.freshness import marks
from lmforge.freshness.lineage import load
from lmforge.freshness.run import parse_budget
from lmforge.freshness.status import Owed, compute, render

DEFAULT = {
    "stages": {
        "make_a": {
            "cmd": "python src/make.py a.txt reports/a.txt",
            "deps": ["src/make.py", "a.txt"],
            "outs": [{"reports/a.txt": {"cache": False}}],
        },
        "make_b": {
            "cmd": "python src/make.py reports/a.txt out/b",
            "deps": ["src/make.py", "reports/a.txt"],
            "outs": ["out/b"],
        },
    }
}
EXPERIMENTS = {
    "stages": {
        "exp": {
            "wdir": "../..",
            "cmd": "python src/slow.py reports/a.txt reports/exp.txt",
            "deps": ["src/slow.py", "reports/a.txt"],
            "outs": [{"reports/exp.txt": {"cache": False}}],
        },
        "exp_b": {
            "wdir": "../..",
            "cmd": "python src/slow.py out/b/x.txt reports/exp_b.txt",
            "deps": ["src/slow.py", "out/b/x.txt"],
            "outs": [{"reports/exp_b.txt": {"cache": False}}],
        },
        "exp_summary": {
            "wdir": "../..",
            "cmd": "python src/slow.py reports/exp.txt reports/summary.txt",
            "deps": ["src/slow.py", "reports/exp.txt"],
            "outs": [{"reports/summary.txt": {"cache": False}}],
        },
    }
}
MAKE = """\
import sys, pathlib
source, target = sys.argv[1], pathlib.Path(sys.argv[2])
text = pathlib.Path(source).read_text()
if target.suffix:
    target.parent.mkdir(parents=True, exist_ok=True); target.write_text(text.upper())
else:
    target.mkdir(parents=True, exist_ok=True); (target / "x.txt").write_text(text); (target / "y.txt").write_text("y")
"""
SLOW = """\
import sys, time, pathlib
time.sleep(float(pathlib.Path("delay").read_text()) if pathlib.Path("delay").exists() else 0)
pathlib.Path(sys.argv[2]).write_text(pathlib.Path(sys.argv[1]).read_text()[::-1])
"""


def sh(root: Path, *args: str) -> str:
    out = subprocess.run(args, cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def commit(root: Path, message: str) -> None:
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def freshness(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lmforge.freshness", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The toy repository with both pipelines run and locked, records written, all committed."""
    root = tmp_path_factory.mktemp("toy")
    (root / "src").mkdir()
    (root / "src/make.py").write_text(MAKE)
    (root / "src/slow.py").write_text(SLOW)
    (root / "a.txt").write_text("hello\n")
    (root / "dvc.yaml").write_text(yaml.safe_dump(DEFAULT, sort_keys=False))
    (root / "pipelines/experiments").mkdir(parents=True)
    (root / "pipelines/experiments/dvc.yaml").write_text(yaml.safe_dump(EXPERIMENTS, sort_keys=False))
    (root / "docs").mkdir()
    (root / "docs/page.md").write_text("# A page\n\nThe experiment wrote `reports/exp.txt`.\n")
    (root / "docs/other.md").write_text("# Other\n\nOnly `reports/a.txt`, the default run's.\n")
    (root / ".gitignore").write_text("/out/\n")
    sh(root, "git", "init", "-q")
    sh(root, sys.executable, "-m", "dvc", "init", "-q")
    commit(root, "toy")
    assert freshness(root, "repro").returncode == 0
    sh(root, sys.executable, "-m", "dvc", "repro", "pipelines/experiments/dvc.yaml")
    assert freshness(root, "status", "--write").returncode == 0
    commit(root, "run")
    return root


@pytest.fixture
def toy(built, tmp_path) -> Path:
    """A copy of the built toy (outputs and DVC cache included) for one test to change."""
    root = tmp_path / "toy"
    sh(built.parent, "cp", "-a", str(built), str(root))
    return root


def edit_the_experiments_code(root: Path) -> None:
    with open(root / "src/slow.py", "a") as f:
        f.write("# an edit\n")


def set_seconds(root: Path, **seconds: float | None) -> dict:
    """Set (None: remove) the recorded seconds of experiment stages; returns the records as they were."""
    path = root / "pipelines/experiments/runs.json"
    records = json.loads(path.read_text())
    before = json.loads(path.read_text())
    for name, value in seconds.items():
        records[name].pop("seconds", None) if value is None else records[name].update(seconds=value)
    path.write_text(json.dumps(records))
    return before


def owed(root: Path) -> dict[str, Owed]:
    return {o.id: o for o in compute(root).owed}


@pytest.mark.slow
def test_a_fresh_toy_owes_nothing_and_records_each_stage(built):
    assert owed(built) == {}
    records = json.loads((built / "pipelines/runs.json").read_text())
    assert set(records) == {"make_a", "make_b"} and isinstance(records["make_a"]["seconds"], float)
    assert json.loads((built / marks.STALE_FILE).read_text()) == {"stages": {}}
    assert "stale-marks" not in (built / "docs/page.md").read_text()


@pytest.mark.slow
def test_a_code_change_makes_its_readers_and_their_consumers_owed(toy):
    edit_the_experiments_code(toy)
    found = owed(toy)
    assert set(found) == {f"pipelines/experiments/dvc.yaml:{s}" for s in ("exp", "exp_b", "exp_summary")}
    assert found["pipelines/experiments/dvc.yaml:exp"].changed == ["src/slow.py"]
    assert found["pipelines/experiments/dvc.yaml:exp_summary"].after == ["pipelines/experiments/dvc.yaml:exp"]
    head = sh(toy, "git", "rev-parse", "--short=7", "HEAD~1").strip()  # the commit that locked them
    assert found["pipelines/experiments/dvc.yaml:exp"].measured_at == head


@pytest.mark.slow
def test_a_changed_default_output_makes_the_experiments_reading_it_stale_without_anything_built(toy):
    (toy / "a.txt").write_text("changed\n")
    assert freshness(toy, "repro").returncode == 0  # the default pipeline reruns: reports/a.txt changes
    sh(toy, "rm", "-rf", "out", ".dvc/cache")  # nothing built: the verdict comes from the locks alone
    found = owed(toy)
    exp, exp_b = (found[f"pipelines/experiments/dvc.yaml:{s}"] for s in ("exp", "exp_b"))
    assert exp.changed == ["reports/a.txt (make_a reran)"]
    assert exp_b.changed == ["out/b/x.txt (make_b reran)"]  # a file inside a folder output: its record
    assert not [o for o in found if ":" not in o]  # the default pipeline is fresh
    assert "make_b" in compute(toy).not_built  # absent here, nothing changed: not owed


@pytest.mark.slow
def test_the_marks_name_each_stale_experiment_where_its_numbers_are_read(toy):
    edit_the_experiments_code(toy)
    status = compute(toy)
    assert set(marks.out_of_date(toy, status)) == {marks.STALE_FILE, "docs/page.md"}
    marks.write(toy, status)
    assert marks.out_of_date(toy, status) == []
    record = json.loads((toy / marks.STALE_FILE).read_text())["stages"]
    head = sh(toy, "git", "rev-parse", "--short=7", "HEAD~1").strip()
    assert record["exp"]["mark"] == f"stale: measured at {head}, changed since: src/slow.py"
    assert record["exp_summary"]["mark"].endswith("src/slow.py, exp is owed a rerun")
    page = (toy / "docs/page.md").read_text()
    assert page.startswith("# A page\n\n" + marks.BEGIN + "\n")
    assert f"`exp` (quoted as `reports/exp.txt`): stale: measured at {head}" in page
    assert "stale-marks" not in (toy / "docs/other.md").read_text()  # quotes the default run only


@pytest.mark.slow
def test_catch_up_stops_before_a_stage_that_does_not_fit_and_the_next_call_continues(toy):
    edit_the_experiments_code(toy)
    (toy / "delay").write_text("2")
    records = set_seconds(toy, exp_b=3600.0)  # its last run took an hour: a 2-minute budget cannot hold it
    first = freshness(toy, "catch-up", "--budget", "2m")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "left: pipelines/experiments/dvc.yaml:exp_b: needs 60.0 min" in first.stdout
    left = owed(toy)
    assert set(left) == {"pipelines/experiments/dvc.yaml:exp_b"}  # exp and exp_summary ran and locked
    records = set_seconds(toy, exp_b=2.0)
    assert records["exp"]["seconds"] >= 2 and records["exp"]["at_least"] is False
    page = (toy / "docs/page.md").read_text()
    assert "stale-marks" not in page  # exp is current again: its mark is gone
    second = freshness(toy, "catch-up", "--budget", "2m")
    assert second.returncode == 0 and owed(toy) == {}
    assert "Nothing is owed" in second.stdout


@pytest.mark.slow
def test_a_stage_never_timed_is_stopped_at_the_budget_and_recorded_as_needing_more(toy):
    edit_the_experiments_code(toy)
    (toy / "delay").write_text("300")
    set_seconds(toy, exp=None, exp_b=None, exp_summary=None)
    out = freshness(toy, "catch-up", "--budget", "8s")
    assert "stopped at the budget" in out.stdout, out.stdout[-3000:]
    records = json.loads((toy / "pipelines/experiments/runs.json").read_text())
    assert records["exp"]["at_least"] is True and 3 < records["exp"]["seconds"] <= 8  # DVC starts first
    assert "pipelines/experiments/dvc.yaml:exp" in owed(toy)  # not locked: the next call reruns it
    assert "[> " in render(compute(toy))


def test_budgets_read_hours_minutes_and_seconds_and_refuse_the_rest():
    assert [parse_budget(b) for b in ("2h", "90m", "45s", "600", "1.5h")] == [7200, 5400, 45, 600, 5400]
    for bad in ("", "two hours", "-1h", "0"):
        with pytest.raises(ValueError, match="budget: got"):
            parse_budget(bad)


def test_a_bad_budget_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    out = freshness(tmp_path, "catch-up", "--budget", "soon")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0 and "soon" in out.stderr


def test_cites_finds_paths_inside_and_folders_holding_only_experiment_outputs():
    text = (
        "See `reports/x/rows/`, `reports/x/rows/a/m.json`, `reports/shared/` and `reports/x/runs/*/m.json`."
    )
    outs = ("reports/x/rows/a", "reports/x/runs/r1/m.json", "reports/shared/e.json")
    assert marks.cites(text, outs, others=("reports/shared/d.json",)) == [
        "reports/x/rows/",
        "reports/x/rows/a/m.json",
        "reports/x/runs/*/m.json",
    ]


@pytest.mark.slow
def test_a_stage_with_no_lock_entry_is_owed_as_never_run(built):
    lineage = load(built)
    del lineage.locks["pipelines/experiments/dvc.yaml:exp"]
    found = {o.id: o for o in compute(built, lineage).owed}
    assert found["pipelines/experiments/dvc.yaml:exp"].changed == ["never run"]
    assert marks.mark(found["pipelines/experiments/dvc.yaml:exp"]).startswith("stale: never run")
