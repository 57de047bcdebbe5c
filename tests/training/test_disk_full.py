"""A write that runs out of room: one `StorageError` line naming the file and the bytes it needed, no
temporary file left, the earlier file intact; checkpoints are written beside their target, never
through the system's temporary folder; and a training run whose disk fills resumes, once there is
room again, to the curve of an uninterrupted run."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile
from collections import namedtuple
from pathlib import Path

import pytest
import torch

from helpers import SMOKE_DECODER
from lmforge import io
from lmforge.errors import StorageError
from lmforge.training.checkpoints import FileCheckpointIO, read_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def test_running_out_of_room_mid_write_keeps_the_earlier_file(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("earlier\n")
    with pytest.raises(StorageError) as caught, io.atomic_path(target) as tmp:
        tmp.write_bytes(b"x" * 1000)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    message = str(caught.value)
    assert "\n" not in message and str(target) in message and "more than the 1,000 bytes written" in message
    assert target.read_text() == "earlier\n" and [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_a_write_larger_than_the_free_space_is_refused_before_a_byte(tmp_path, monkeypatch):
    target = tmp_path / "model.ckpt"
    target.write_bytes(b"earlier")
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(io.shutil, "disk_usage", lambda path: usage(100, 90, 10))
    with pytest.raises(
        StorageError, match=r"model.ckpt \(No space left on device\): it needs 11 bytes, 10 are"
    ):
        io.write_bytes(target, b"x" * 11)
    assert target.read_bytes() == b"earlier" and [p.name for p in tmp_path.iterdir()] == ["model.ckpt"]
    io.write_bytes(target, b"x" * 10)
    assert target.read_bytes() == b"x" * 10


def test_other_os_errors_pass_through(tmp_path):
    with pytest.raises(PermissionError), io.atomic_path(tmp_path / "a.txt"):
        raise PermissionError(errno.EACCES, "denied")
    assert list(tmp_path.iterdir()) == []


def test_checkpoints_are_written_beside_their_target(tmp_path, monkeypatch):
    folders = []
    mkstemp = tempfile.mkstemp

    def recording(*args, **kwargs):
        folders.append(Path(kwargs.get("dir") or tempfile.gettempdir()))
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", recording)
    path = tmp_path / "run" / "last.ckpt"
    FileCheckpointIO().save_checkpoint({"state_dict": {"w": torch.ones(3)}, "hyper_parameters": {}}, path)
    assert folders == [path.parent]
    assert torch.equal(read_checkpoint(path)["state_dict"]["w"], torch.ones(3))


BASE = [
    *SMOKE_DECODER,
    "trainer.max_steps=24",
    "trainer.val_check_interval=8",
    "train.checkpoint_every=4",
    "logger=none",
]


def _pretrain(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, str(ROOT / "pipelines" / "pretrain.py"), *BASE, *args]
    return subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=600)


def _mount(folder: Path, size: int, remount: bool = False) -> bool:
    options = f"{'remount,' if remount else ''}size={size}"
    command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)]
    return subprocess.run(command, capture_output=True).returncode == 0


@pytest.mark.slow
def test_a_run_whose_disk_fills_stops_in_one_line_and_resumes_to_the_same_curve(workspace, tmp_path):
    """On a tmpfs with room for one last.ckpt and a little more, the second last.ckpt does not fit."""
    whole = _pretrain(workspace, "run_name=whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    size = (workspace / "artifacts/pretrain/whole/last.ckpt").stat().st_size
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _mount(disk, int(size * 1.7)):
        pytest.skip("no permission to mount a tmpfs here (the CI machine runs as root and has one)")
    try:
        out = [f"train.out_dir={disk}/run", "run_name=full"]
        full = _pretrain(workspace, *out)
        assert full.returncode == 2, full.stderr[-3000:]
        lines = [line for line in full.stderr.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "no room to write" in lines[0] and "Traceback" not in full.stderr, (
            full.stderr
        )
        assert "bytes" in lines[0] and str(disk / "run") in lines[0]
        assert not [p for p in (disk / "run").iterdir() if p.name.endswith(".tmp")]
        assert read_checkpoint(disk / "run" / "last.ckpt", needs=("state_dict", "loops"))["global_step"] >= 4

        assert _mount(disk, size * 10, remount=True)  # room again: continue from that last.ckpt
        resumed = _pretrain(workspace, *out, "train.resume=true")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
    for curve in ("train_loss.csv", "val_loss.csv"):
        reports = workspace / "reports/pretrain"
        assert (reports / "full" / curve).read_text() == (reports / "whole" / curve).read_text()
