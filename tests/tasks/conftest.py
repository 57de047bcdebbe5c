"""Fixtures for the task-dataset tests: task configs pointing at tiny files in the real formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def make_task(tmp_path: Path, **task) -> DictConfig:
    """A full config whose `task` group writes under tmp_path and caches under tmp_path/cache."""
    node = {"out_dir": str(tmp_path / "out"), "cache_dir": str(tmp_path / "cache"), **task}
    return OmegaConf.create({"task": node})


@pytest.fixture
def task_cfg(tmp_path: Path):
    """task_cfg(**task) -> a config for this test's tmp_path."""
    return lambda **task: make_task(tmp_path, **task)


@pytest.fixture
def fixtures() -> Path:
    """tests/tasks/fixtures: tiny files in the real formats of each source."""
    return FIXTURES


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def read_jsonl():
    """read_jsonl(path) -> the records of a JSONL file."""
    return lambda path: [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
