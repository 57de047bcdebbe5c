"""Atomic file output (a temporary file beside the target, then a rename) and process locks.

A crash or a bad input halfway through a stage therefore never leaves a truncated file where a
good one stood: readers see either the old complete file or the new complete one. `exclusive`
keeps two runs from writing the same outputs at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from lmforge.errors import DataError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's directory; on success rename it onto `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o644)  # mkstemp creates 0600; outputs are ordinary readable files
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


def sha256_files(paths: Iterable[str | os.PathLike]) -> str:
    """Hex sha256 over the bytes of `paths` in order, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def exclusive(lock_file: str | os.PathLike, what: str, wait: bool = False) -> Iterator[None]:
    """Hold an exclusive `flock` on `lock_file` for the block; the kernel drops it if the process dies.

    With `wait=False` a lock held by another process is refused at once with one line naming `what`.
    """
    lock_file = Path(lock_file)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise DataError(f"{what} is in use by another run; expected one run at a time") from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
