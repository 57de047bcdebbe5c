"""lmforge.timings: where a stage's clock goes, and that a clock never fails a run."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from lmforge import timings
from lmforge.errors import StorageError
from lmforge.timings import read_clock_file, read_timings, timings_path, write_clock_file, write_timings


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("reports/pretrain/encoder", "reports/timings/pretrain/encoder.json"),
        ("reports/translate/main/eval.json", "reports/timings/translate/main/eval.json"),
        ("x/reports/arch.json", "x/reports/timings/arch.json"),
        ("artifacts/scaling/cell", "artifacts/scaling/cell.timings.json"),
    ],
)
def test_a_clock_sits_under_reports_timings_at_its_output_place(output, expected):
    assert timings_path(output) == Path(expected)


def test_write_then_read_and_unreadable_clocks_read_as_empty(tmp_path):
    out = tmp_path / "reports/pretrain/run"
    assert read_timings(out) == {}
    written = write_timings(out, {"wall_seconds": 2.5})
    assert written == tmp_path / "reports/timings/pretrain/run.json"
    assert read_timings(out) == {"wall_seconds": 2.5}
    written.write_text("{half")
    assert read_timings(out) == {}
    written.write_text("[1, 2]")  # JSON, but not an object
    assert read_timings(out) == {} and read_clock_file(None) == {}


def test_a_clock_that_cannot_be_written_warns_in_one_line_and_the_run_goes_on(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="lmforge.timings"):
        assert write_clock_file(blocker / "clock.json", {"wall_seconds": 1.0}) is False  # OSError
    assert "timings not written" in caplog.text

    def full(path, obj):
        raise StorageError(f"no room to write {path} (No space left on device): it needs more")

    monkeypatch.setattr(timings, "write_json", full)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lmforge.timings"):
        assert (
            write_timings(tmp_path / "reports/run", {"wall_seconds": 1.0})
            == tmp_path / "reports/timings/run.json"
        )
    assert "no room to write" in caplog.text and len(caplog.records) == 1
    assert not (tmp_path / "reports/timings/run.json").exists()
    monkeypatch.undo()
    assert write_clock_file(tmp_path / "ok.json", {"a": 1}) is True
    assert json.loads((tmp_path / "ok.json").read_text()) == {"a": 1}
