"""benchmarks/stage_times.py: stage seconds from a time-stamped log, and the log from a real command."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tool():
    sys.path.insert(0, str(ROOT))
    try:
        yield importlib.import_module("benchmarks.stage_times")
    finally:
        sys.path.remove(str(ROOT))


def test_each_stage_runs_until_the_next_one_starts(tool, tmp_path):
    log = tmp_path / "log"
    log.write_text(
        '#stage_times start 100.000 ["make", "repro"]\n'
        "130.000 touch .venv/.installed\n"
        "140.000 Running stage 'prepare':\n"
        "150.500 Stage 'tokenizer@bpe' didn't change, skipping\n"
        "160.000 Running stage 'pretrain@encoder':\n"
        "165.000 some output\n"
        "#stage_times end 400.000 0\n"
    )
    result = tool.table(log)
    assert result["stages"] == [
        {"stage": "prepare", "seconds": 20.0},
        {"stage": "tokenizer@bpe", "seconds": None},
        {"stage": "pretrain@encoder", "seconds": 240.0},
    ]
    assert result["before_first_stage"] == 40.0
    assert result["stages_seconds"] == 260.0
    assert result["total_seconds"] == 300.0
    assert result["command"] == ["make", "repro"] and result["exit_code"] == 0


def test_a_log_it_did_not_write_is_refused(tool, tmp_path):
    log = tmp_path / "log"
    log.write_text("Running stage 'prepare':\n")
    with pytest.raises(SystemExit, match="no start and end lines"):
        tool.table(log)


def test_it_times_a_command_and_keeps_its_exit_status(tmp_path):
    script = "import time; print(\"Running stage 'a':\", flush=True); time.sleep(0.3); print(\"Running stage 'b':\"); raise SystemExit(3)"
    log = tmp_path / "log"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.stage_times",
            "--log",
            str(log),
            "--",
            sys.executable,
            "-c",
            script,
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3
    assert "Running stage 'a'" in done.stdout  # echoed
    report = json.loads((tmp_path / "reports/bench/stage_times.json").read_text())
    assert report["cores"] >= 1 and "commit" in report  # the host line of the log
    a, b = report["stages"]
    assert a["stage"] == "a" and 0.25 <= a["seconds"] < 5
    assert b["stage"] == "b" and report["exit_code"] == 3


def test_the_docs_table_puts_a_stage_s_instances_on_one_row(tool):
    result = {
        "stages": [
            {"stage": "prepare", "seconds": 12.4},
            {"stage": "pretrain@encoder", "seconds": 390.0},
            {"stage": "pretrain@decoder", "seconds": 420.0},
            {"stage": "scaling_fit", "seconds": None},
        ],
        "stages_seconds": 822.4,
    }
    assert tool.markdown(result).splitlines() == [
        "| stage | instances | seconds | minutes |",
        "|---|---|---|---|",
        "| prepare |  | 12 | 0.2 |",
        "| pretrain | encoder, decoder | 390, 420 | 13.5 |",
        "| scaling_fit |  | skipped | 0.0 |",
        "| **all stages** | | **822** | **13.7** |",
    ]
