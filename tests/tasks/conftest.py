"""Fixtures for the task-dataset tests: task configs pointing at tiny files in the real formats."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
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


def plant(cache: Path, client: str, package: str, version: str, filename: str, data: bytes) -> str:
    """Put `data` where lmforge.corpora.fetch caches `package==version`, as if fetched; return its sha256."""
    folder = cache / client / f"{package}-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / filename).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def tar_gz(members: dict[str, bytes]) -> bytes:
    """A .tar.gz holding `members` (name -> bytes), in name order."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def planted(tmp_path: Path):
    """planted(client, package, version, filename, data) -> sha256, planted in this test's cache."""
    return lambda *args: plant(tmp_path / "cache", *args)


@pytest.fixture(name="tar_gz")
def tar_gz_fixture():
    """tar_gz(members) -> bytes of a .tar.gz holding members (name -> bytes)."""
    return tar_gz
