"""The reports a finding reads, and where each comes from.

A report of the default pipeline is a DVC dependency of the findings stage, so DVC keeps it current.
A report of pipelines/experiments/ is not: declaring it would make `dvc repro` rerun hours of
experiments upstream of the findings. The stage depends on that pipeline's dvc.lock instead, which
records each report's md5, and reads a report only while its content matches the lock; a report that
is missing or differs (an experiment rerun but not committed, or not run) makes its claim "not tested".
A report of an experiment that lags the code (pipelines/experiments/stale.json, written by `make
status`) is read as it stands, and the stage it came from is noted (`stale`): the report marks what
read it "stale: measured at <commit>, changed since: ...".
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import yaml

from lmforge.errors import DataError


class MissingEvidence(Exception):
    """A report a claim needs is absent, or differs from what the experiments' lock pins."""


class Evidence:
    def __init__(
        self,
        reports_dir: str | Path,
        experiments_lock: str | Path,
        experiments_stale: str | Path | None = None,
    ) -> None:
        self.reports = Path(reports_dir)
        self.pinned = pinned_outputs(Path(experiments_lock))
        self.lagging = stale_stages(Path(experiments_stale)) if experiments_stale is not None else {}
        self.read: list[str] = []  # every report read, in order, for the report's provenance list
        self.stale: dict[str, str] = {}  # stage -> its mark, for the stale reports read since the last reset

    def path(self, relative: str) -> Path:
        return self.reports / relative

    def json(self, relative: str) -> Any:
        path = self.path(relative)
        if not path.is_file():
            raise MissingEvidence(f"{path} does not exist ({self.producer(path)})")
        data = path.read_bytes()
        key = self.key(path)
        if key in self.pinned:
            stage, md5 = self.pinned[key]
            if hashlib.md5(data).hexdigest() != md5:
                raise MissingEvidence(
                    f"{path} differs from what pipelines/experiments/dvc.lock pins for {stage} "
                    f"(rerun `dvc repro pipelines/experiments/dvc.yaml:{stage}` and commit its lock)"
                )
        try:
            value = json.loads(data)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: not JSON ({err}); expected a stage's report") from None
        if key not in self.read:
            self.read.append(key)
        for stage, (outs, mark) in self.lagging.items():
            if any(key == out or key.startswith(out.rstrip("/") + "/") for out in outs):
                self.stale[stage] = mark
        return value

    @staticmethod
    def key(path: Path) -> str:
        """A path as the lock records it: relative to the repository root, where stages run."""
        return Path(os.path.relpath(path)).as_posix()

    def producer(self, path: Path) -> str:
        key = self.key(path)
        if key in self.pinned:
            return f"pipelines/experiments/dvc.yaml:{self.pinned[key][0]}"
        return "no stage of pipelines/experiments/dvc.lock records it; for a dvc.yaml stage, run it"


def pinned_outputs(lock: Path) -> dict[str, tuple[str, str]]:
    """{output path: (stage, md5)} for every file output the lock records (directories aside)."""
    try:
        stages = yaml.safe_load(lock.read_text(encoding="utf-8"))["stages"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as err:
        raise DataError(f"{lock}: {err}; expected the experiments pipeline's dvc.lock") from None
    pinned = {}
    for stage, record in stages.items():
        for out in record.get("outs", []):
            md5 = out.get("md5", "")
            if md5 and not md5.endswith(".dir"):
                pinned[out["path"]] = (stage, md5)
    return pinned


def stale_stages(path: Path) -> dict[str, tuple[list[str], str]]:
    """{stage: (its outputs, its mark)} for the experiments that lag the code (none when no file)."""
    if not path.is_file():
        return {}
    try:
        stages = json.loads(path.read_text(encoding="utf-8"))["stages"]
        return {name: (list(s["outs"]), str(s["mark"])) for name, s in stages.items()}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DataError(f"{path}: {err}; expected the stale experiments `make status` writes") from None
