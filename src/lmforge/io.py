"""Atomic file output (a temporary file beside the target, flushed to disk, then a rename) and
process locks.

A crash, a bad input or a full disk halfway through a stage therefore never leaves a truncated
file where a good one stood: readers see either the old complete file or the new complete one, and
the temporary file is removed whatever happens. A write that runs out of room is one
`StorageError` line naming the file and the bytes it needed. `exclusive` keeps two runs from
writing the same outputs at once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from lmforge.errors import DataError, StorageError

NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})  # disk full, quota, file-size limit


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, size: int | None = None) -> Iterator[Path]:
    """Yield a temporary path in the target's directory; on success flush it to disk and rename it
    onto `path`. With `size` (the bytes about to be written), refuse at once when the file system
    has less free; a write that runs out of room mid-way is refused the same way."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o644)  # mkstemp creates 0600; outputs are ordinary readable files
    try:
        try:
            if size is not None and shutil.disk_usage(path.parent).free < size:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            yield tmp_path
            _fsync(tmp_path)
        except OSError as err:
            if err.errno not in NO_ROOM:
                raise
            raise StorageError(_no_room(path, tmp_path, size, err)) from None
        os.replace(tmp_path, path)
        with contextlib.suppress(OSError):  # not every file system syncs a directory
            _fsync(path.parent)
    finally:
        tmp_path.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_room(path: Path, tmp: Path, size: int | None, err: OSError) -> str:
    written = tmp.stat().st_size if tmp.exists() else 0
    needs = f"{size:,} bytes" if size is not None else f"more than the {written:,} bytes written"
    free = shutil.disk_usage(path.parent).free
    return (
        f"no room to write {path} ({err.strerror}): it needs {needs}, {free:,} are free there; "
        "expected free space on that file system (any earlier copy of the file is kept)"
    )


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """`data` into `path` atomically, refused before writing when the file system has too little room."""
    with atomic_path(path, size=len(data)) as tmp, open(tmp, "wb") as f:
        f.write(data)


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
